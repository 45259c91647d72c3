/** Timers the exporter schedules with (tests pass their own). */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realTimers: Timers = {
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    // An export waiting never keeps the process up.
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/**
 * What the collector answered: its status, how long it asked to be left alone (its
 * Retry-After, ms; null when it did not say), and the spans of a 2xx it said it
 * rejected (OTLP's partial success) with its message.
 */
export interface Answer {
  status: number;
  retryAfterMs: number | null;
  rejected: number;
  message: string;
}

/** One POST of an export request: resolves with the answer (or its status alone), rejects when no answer came. */
export type Post = (body: Uint8Array, signal: AbortSignal) => Promise<number | Answer>;

export interface ExporterOptions<T> {
  /** Spans waiting at most (queued items counted by the spans they become). */
  queueSize: number;
  batchSize: number;
  flushIntervalMs: number;
  timeoutMs: number;
  maxRetries: number;
  /** Spreads each backoff over its last half (tests: () => 1 for the whole of it). */
  random?: () => number;
  /** Spans an item becomes (counted before it is built). */
  count: (item: T) => number;
  /**
   * The queued items' spans as one OTLP export request: done at export time, never as
   * an item is added. An item that cannot be written is left out whole and handed to
   * `skip`; the others are written.
   */
  encode: (items: T[], skip: (item: T, e: Error) => void) => Uint8Array;
  post: Post;
  timers: Timers;
  exported: (n: number) => void;
  /**
   * The last encoded body was answered 2xx, so the collector read all of it (a collector
   * answers an export after reading it, as OTLP/HTTP's do): its memory may be written
   * over by the next `encode`. Never called for a body that failed
   * (kept for a retry, or perhaps still being written to a connection given up on).
   */
  reusable?: () => void;
  dropped: (reason: 'queue_full' | 'export_failed' | 'rejected', n: number) => void;
  queued: (n: number) => void;
  /** Told of an export that failed (once per batch, when its spans are dropped). */
  failed: (why: string) => void;
  /** Told of spans a collector took the export of and rejected (a partial success), with its message. */
  rejected?: (n: number, message: string) => void;
  /**
   * Told of spans that could not be written (an item `encode` skipped, or a batch it
   * could not make): ours, not the collector's, so said apart from `failed`.
   */
  unwritable: (why: string) => void;
}

/** Statuses worth asking again (OTLP/HTTP spec: 429, 502, 503, 504), and no answer at all (0). */
const RETRYABLE = new Set([0, 429, 502, 503, 504]);
/**
 * The first retry waits up to this long, each later one up to twice the one before (1 s,
 * 2 s, 4 s...), spread over the last half of that at random (OTLP/HTTP asks for jitter,
 * so exporters that failed together do not come back together).
 */
const BACKOFF_MS = 1000;
/** A collector's Retry-After is honoured up to this long (a longer one is waited this long). */
const MAX_RETRY_AFTER_MS = 60_000;
/** A stop's last export of what is left waits at most this long. */
const LAST_EXPORT_MS = 2000;

/**
 * The export queue: bounded (past `queueSize` waiting spans, new ones are dropped and
 * counted), one export request at a time, a batch every `flushIntervalMs` or as soon as
 * `batchSize` spans wait, each request abandoned after `timeoutMs` and retried with
 * backoff. A collector that is down or slow costs dropped spans, never memory past
 * the bound nor time on a request.
 */
export class SpanExporter<T> {
  private queue: T[] = [];
  private waiting = 0;
  private busy = false;
  private closed = false;
  private flushTimer: unknown = null;
  /** The flush timer armed is the 0 ms one of a full batch. */
  private soon = false;
  private retryTimer: unknown = null;
  private inflight: AbortController | null = null;
  private settle: (() => void) | null = null;
  /** Export requests that succeeded (a stop asks again only while they do). */
  private succeeded = 0;
  /** Spans of the batch waiting for its retry. */
  private retrying = 0;

  constructor(private readonly o: ExporterOptions<T>) {}

  /** Spans waiting (not yet in an export request). */
  get queuedSpans(): number {
    return this.waiting;
  }

  add(item: T): void {
    const n = this.o.count(item);
    if (this.closed || this.waiting + n > this.o.queueSize) return this.o.dropped('queue_full', n);
    this.queue.push(item);
    this.waiting += n;
    this.o.queued(this.waiting);
    if (this.busy) return;
    // A full batch leaves on a turn of its own: never built on the turn of the request that
    // filled it (with threads: 1 this thread serves requests too).
    this.arm(this.waiting >= this.o.batchSize ? 0 : this.o.flushIntervalMs);
  }

  /** A batch leaves within `ms` (flushIntervalMs of the first span waiting; 0 once a batch is full). */
  private arm(ms: number): void {
    if (this.flushTimer !== null) {
      if (ms !== 0 || this.soon) return;
      this.o.timers.clearTimeout(this.flushTimer);
    }
    this.soon = ms === 0;
    this.flushTimer = this.o.timers.setTimeout(() => {
      this.flushTimer = null;
      this.start();
    }, ms);
  }

  /** The next batch: what is waiting, up to batchSize spans. */
  private take(): { body: Uint8Array; n: number } | null {
    if (this.queue.length === 0) return null;
    let i = 0;
    let n = 0;
    while (i < this.queue.length && n < this.o.batchSize) n += this.o.count(this.queue[i++] as T);
    const items = this.queue.splice(0, i);
    this.waiting -= n;
    this.o.queued(this.waiting);
    const body = this.o.encode(items, (item, e) => {
      // Its spans are lost, and said so; the batch's others leave.
      const lost = this.o.count(item);
      n -= lost;
      this.o.dropped('export_failed', lost);
      this.o.unwritable(e.message);
    });
    return { body, n };
  }

  private start(): void {
    if (this.busy || this.closed) return;
    if (this.flushTimer !== null) {
      this.o.timers.clearTimeout(this.flushTimer);
      this.flushTimer = null;
    }
    let batch: { body: Uint8Array; n: number } | null;
    try {
      batch = this.take();
    } catch (e) {
      this.o.unwritable((e as Error).message);
      return;
    }
    if (batch === null) return;
    // Nothing of it could be written: no empty export request (OTLP: it SHOULD NOT be sent).
    if (batch.n === 0) {
      if (this.waiting > 0) this.arm(this.waiting >= this.o.batchSize ? 0 : this.o.flushIntervalMs);
      return;
    }
    this.busy = true;
    this.attempt(batch.body, batch.n, 0, this.o.timeoutMs);
  }

  private attempt(body: Uint8Array, n: number, tries: number, timeoutMs: number): void {
    const ac = new AbortController();
    this.inflight = ac;
    const timer = this.o.timers.setTimeout(() => ac.abort(new Error('timed out')), timeoutMs);
    const done = (a: Answer, why: string) => {
      const status = a.status;
      this.o.timers.clearTimeout(timer);
      this.inflight = null;
      if (status >= 200 && status < 300) {
        this.o.reusable?.();
        const rejected = Math.min(n, Math.max(0, a.rejected));
        this.o.exported(n - rejected);
        if (rejected > 0) {
          this.o.dropped('rejected', rejected);
          this.o.rejected?.(rejected, a.message);
        }
        this.succeeded++;
      } else if (RETRYABLE.has(status) && tries < this.o.maxRetries && !this.closed) {
        this.retrying = n;
        const backoff = BACKOFF_MS * 2 ** tries * (0.5 + 0.5 * (this.o.random ?? Math.random)());
        // The collector's own wait (429, 503) lengthens the backoff, never shortens it.
        const wait = Math.max(backoff, Math.min(a.retryAfterMs ?? 0, MAX_RETRY_AFTER_MS));
        this.retryTimer = this.o.timers.setTimeout(() => {
          this.retryTimer = null;
          this.retrying = 0;
          this.attempt(body, n, tries + 1, timeoutMs);
        }, wait);
        return;
      } else {
        this.o.dropped(RETRYABLE.has(status) ? 'export_failed' : 'rejected', n);
        this.o.failed(why);
      }
      this.busy = false;
      const settle = this.settle;
      this.settle = null;
      if (settle !== null) return settle();
      if (this.waiting > 0) this.arm(this.waiting >= this.o.batchSize ? 0 : this.o.flushIntervalMs);
    };
    this.o.post(body, ac.signal).then(
      (r) => {
        const a = typeof r === 'number' ? { status: r, retryAfterMs: null, rejected: 0, message: '' } : r;
        done(a, `the collector answered ${a.status}`);
      },
      (e: Error) =>
        done(
          { status: 0, retryAfterMs: null, rejected: 0, message: '' },
          `the collector could not be reached (${(e as { code?: string }).code ?? e.message})`,
        ),
    );
  }

  /**
   * Stops: what is in flight and what waits get one short last chance together (LAST_EXPORT_MS,
   * no retry): what is in flight is abandoned past it, and what waits is not sent when the
   * collector did not answer what was in flight.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of [this.flushTimer, this.retryTimer]) if (t !== null) this.o.timers.clearTimeout(t);
    this.flushTimer = null;
    if (this.retryTimer !== null) {
      // A batch waiting for its retry: dropped now (the collector was failing).
      this.retryTimer = null;
      this.o.dropped('export_failed', this.retrying);
      this.retrying = 0;
      this.busy = false;
    }
    const deadline = performance.now() + LAST_EXPORT_MS;
    let healthy = true;
    if (this.busy) {
      // An export in flight at the stop is given the stop's time to be answered: a collector
      // answering it in time is healthy, and what waits leaves after it. Past the deadline it
      // is slow or stuck: abandoned, and not asked again.
      const before = this.succeeded;
      const settled = new Promise<void>((r) => {
        this.settle = r;
      });
      const cut = this.o.timers.setTimeout(
        () => this.inflight?.abort(new Error('stopping')),
        Math.max(1, deadline - performance.now()),
      );
      await settled;
      this.o.timers.clearTimeout(cut);
      healthy = this.succeeded > before;
    }
    while (healthy && this.waiting > 0 && performance.now() < deadline) {
      let batch: { body: Uint8Array; n: number } | null;
      try {
        batch = this.take();
      } catch {
        break;
      }
      if (batch === null) break;
      if (batch.n === 0) continue;
      const b = batch;
      const before = this.succeeded;
      this.busy = true;
      await new Promise<void>((r) => {
        this.settle = r;
        this.attempt(
          b.body,
          b.n,
          this.o.maxRetries,
          Math.max(1, Math.min(this.o.timeoutMs, deadline - performance.now())),
        );
      });
      healthy = this.succeeded > before;
    }
    // What could not leave in time is dropped, and counted.
    if (this.waiting > 0) this.o.dropped('export_failed', this.waiting);
    this.queue = [];
    this.waiting = 0;
    this.o.queued(0);
  }
}
