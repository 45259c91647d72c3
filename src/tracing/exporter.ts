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

/**
 * An export request's body at most (bytes), whatever `batchSize` allows (up to 100,000
 * spans, tens of MB): collectors refuse larger ones (the OpenTelemetry Collector's OTLP/HTTP
 * receiver past its max_request_body_size, 20 MiB by default, with a 413; a Collector that
 * passes spans on over OTLP/gRPC, past the next one's 4 MiB max_recv_msg_size_mib). 4 MiB is
 * within both, and what an export request and its retry hold at most. A batch that would
 * pass it leaves as several requests; a span larger than it alone is dropped.
 */
export const MAX_EXPORT_BYTES = 4 * 1024 * 1024;
/** A 413 halves the bound (the collector's is lower than ours), down to this at least. */
const MIN_EXPORT_BYTES = 1024;

/** An export request written from the first `used` items given (each in it, or skipped); the rest did not fit. */
export interface Encoded {
  body: Uint8Array;
  used: number;
}

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
   * `skip`; the others are written. A body is at most `maxBytes`: the items from the first
   * that fit are written (`used` of them: an Encoded), the rest wait for the next request;
   * a first item that alone is larger is skipped. A plain body: every item was used.
   */
  encode: (items: T[], skip: (item: T, e: Error) => void, maxBytes: number) => Uint8Array | Encoded;
  /** An export request's body at most, bytes (MAX_EXPORT_BYTES when not given; tests, a small one). */
  maxBytes?: number;
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
  /** Told that a collector refused a body as too large (413), and the smaller bound the exporter keeps to from now on. */
  tooLarge?: (bytes: number, bound: number) => void;
  /**
   * Told of spans that could not be written (an item `encode` skipped, or a batch it
   * could not make): ours, not the collector's, so said apart from `failed`.
   */
  unwritable: (why: string) => void;
}

/** An export request being made: its body, its spans, and the items written in it. */
interface Batch<T> {
  body: Uint8Array;
  n: number;
  items: T[];
}

/** Statuses worth asking again (OTLP/HTTP spec: 429, 502, 503, 504), and no answer at all (0). */
const RETRYABLE = new Set([0, 429, 502, 503, 504]);
/** No answer (unreachable, or not in time): retried as a 503 is. */
const NO_ANSWER: Answer = Object.freeze({ status: 0, retryAfterMs: null, rejected: 0, message: '' });
/**
 * The first retry waits up to this long, each later one up to twice the one before (1 s,
 * 2 s, 4 s...), spread over the last half of that at random (OTLP/HTTP asks for jitter,
 * so exporters that failed together do not come back together).
 */
const BACKOFF_MS = 1000;
/** How long an abandoned POST is given to settle before it is no longer waited for. */
const ABANDON_GRACE_MS = 100;
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
  /** Abandons the export in flight (null: none): its signal aborted, and its answer no longer waited for. */
  private inflight: ((why: string) => void) | null = null;
  private settle: (() => void) | null = null;
  /** Export requests that succeeded (a stop asks again only while they do). */
  private succeeded = 0;
  /** Spans of the batch waiting for its retry. */
  private retrying = 0;
  /** An export request's body at most: the configured bound, halved by each 413. */
  private maxBytes: number;
  /** The last batch left items behind that did not fit its body: they leave next, at once. */
  private split = false;

  constructor(private readonly o: ExporterOptions<T>) {
    this.maxBytes = Math.max(MIN_EXPORT_BYTES, o.maxBytes ?? MAX_EXPORT_BYTES);
  }

  /** Spans waiting (not yet in an export request). */
  get queuedSpans(): number {
    return this.waiting;
  }

  add(item: T): void {
    const n = this.o.count(item);
    // After the stop, a span is lost as the stop's are (export_failed), not to a full queue.
    if (this.closed) return this.o.dropped('export_failed', n);
    if (this.waiting + n > this.o.queueSize) return this.o.dropped('queue_full', n);
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

  /**
   * The next batch: what is waiting, up to batchSize spans and maxBytes of body. Its items
   * (those written) are kept with it: a 413 puts them back to leave in smaller requests.
   */
  private take(): Batch<T> | null {
    if (this.queue.length === 0) return null;
    let i = 0;
    let n = 0;
    while (i < this.queue.length && n < this.o.batchSize) n += this.o.count(this.queue[i++] as T);
    const items = this.queue.length === i ? this.queue : this.queue.slice(0, i);
    const skipped: T[] = [];
    let lost = 0;
    const skip = (item: T, e: Error) => {
      // Its spans are lost, and said so; the batch's others leave.
      const spans = this.o.count(item);
      lost += spans;
      skipped.push(item);
      this.o.dropped('export_failed', spans);
      this.o.unwritable(e.message);
    };
    let out: Uint8Array | Encoded;
    try {
      out = this.o.encode(items, skip, this.maxBytes);
    } catch (e) {
      // Nothing of it could be written: its spans are dropped, counted.
      this.queue.splice(0, i);
      this.waiting -= n;
      this.o.queued(this.waiting);
      if (n > lost) this.o.dropped('export_failed', n - lost);
      throw e;
    }
    let body: Uint8Array;
    let used = i;
    if (out instanceof Uint8Array) body = out;
    else {
      body = out.body;
      // At least the first: it was written, or skipped as too large alone.
      used = Math.min(i, Math.max(1, out.used));
    }
    let taken = items;
    if (used < i) {
      // What did not fit waits, first in line, for the next request (right after this one).
      taken = items.slice(0, used);
      n = 0;
      for (const item of taken) n += this.o.count(item);
    }
    this.split = used < i;
    this.queue = this.queue.length === used ? [] : this.queue.slice(used);
    this.waiting -= n;
    this.o.queued(this.waiting);
    const written = skipped.length === 0 ? taken : taken.filter((item) => !skipped.includes(item));
    return { body, n: n - lost, items: written };
  }

  /** A batch leaves at once when one is full or the last one left items behind, else within flushIntervalMs. */
  private next(): void {
    if (this.waiting > 0) this.arm(this.waiting >= this.o.batchSize || this.split ? 0 : this.o.flushIntervalMs);
  }

  private start(): void {
    if (this.busy || this.closed) return;
    if (this.flushTimer !== null) {
      this.o.timers.clearTimeout(this.flushTimer);
      this.flushTimer = null;
    }
    let batch: Batch<T> | null;
    try {
      batch = this.take();
    } catch (e) {
      this.o.unwritable((e as Error).message);
      return this.next();
    }
    if (batch === null) return;
    // Nothing of it could be written: no empty export request (OTLP: it SHOULD NOT be sent).
    if (batch.n === 0) return this.next();
    this.busy = true;
    this.attempt(batch, 0, this.o.timeoutMs);
  }

  private attempt(batch: Batch<T>, tries: number, timeoutMs: number): void {
    const { body, n } = batch;
    const ac = new AbortController();
    let over = false;
    let grace: unknown = null;
    // Abandoned: the POST is told (one that heeds it settles at once, with what it had: a 2xx
    // whose body was still coming is the collector's word all the same), and is no longer
    // waited for past ABANDON_GRACE_MS whether or not it heeds it (a client still connecting
    // may not: undici waits for its own connect timeout).
    const abandon = (why: string) => {
      if (over || grace !== null) return;
      ac.abort(new Error(why));
      grace = this.o.timers.setTimeout(
        () => done(NO_ANSWER, `the collector did not answer (${why})`),
        ABANDON_GRACE_MS,
      );
    };
    this.inflight = abandon;
    const timer = this.o.timers.setTimeout(() => abandon('timed out'), timeoutMs);
    const done = (a: Answer, why: string) => {
      if (over) return;
      over = true;
      const status = a.status;
      this.o.timers.clearTimeout(timer);
      if (grace !== null) this.o.timers.clearTimeout(grace);
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
          this.attempt(batch, tries + 1, timeoutMs);
        }, wait);
        return;
      } else if (status === 413 && batch.items.length > 1 && body.length >> 1 >= MIN_EXPORT_BYTES && !this.closed) {
        // Too large for this collector (its bound is below ours): never sent again as it was.
        // Its items go back first in line, to leave at once in requests of half its size at
        // most, the bound kept from now on: each 413 halves it, so this ends. One item alone
        // refused, or a body already within twice the floor, is dropped (below), as rejected.
        this.maxBytes = Math.min(this.maxBytes, body.length >> 1);
        this.queue = batch.items.concat(this.queue);
        this.waiting += n;
        this.o.queued(this.waiting);
        this.split = true;
        this.o.tooLarge?.(body.length, this.maxBytes);
      } else {
        this.o.dropped(RETRYABLE.has(status) ? 'export_failed' : 'rejected', n);
        this.o.failed(why);
      }
      this.busy = false;
      const settle = this.settle;
      this.settle = null;
      if (settle !== null) return settle();
      this.next();
    };
    this.o.post(body, ac.signal).then(
      (r) => {
        const a = typeof r === 'number' ? { status: r, retryAfterMs: null, rejected: 0, message: '' } : r;
        done(a, `the collector answered ${a.status}`);
      },
      (e: Error) =>
        done(NO_ANSWER, `the collector could not be reached (${(e as { code?: string }).code ?? e.message})`),
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
    let healthy = true;
    if (this.retryTimer !== null) {
      // A batch waiting for its retry: dropped now, and nothing more is sent to a collector
      // that was failing or had asked to be left alone for a while (429, 503 Retry-After).
      this.retryTimer = null;
      this.o.dropped('export_failed', this.retrying);
      this.retrying = 0;
      this.busy = false;
      healthy = false;
    }
    const deadline = performance.now() + LAST_EXPORT_MS;
    if (this.busy) {
      // An export in flight at the stop is given the stop's time to be answered: a collector
      // answering it in time is healthy, and what waits leaves after it. Past the deadline it
      // is slow or stuck: abandoned, and not asked again.
      const before = this.succeeded;
      const settled = new Promise<void>((r) => {
        this.settle = r;
      });
      const cut = this.o.timers.setTimeout(
        () => this.inflight?.('stopping'),
        Math.max(1, deadline - performance.now()),
      );
      await settled;
      this.o.timers.clearTimeout(cut);
      healthy = this.succeeded > before;
    }
    while (healthy && this.waiting > 0 && performance.now() < deadline) {
      let batch: Batch<T> | null;
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
        this.attempt(b, this.o.maxRetries, Math.max(1, Math.min(this.o.timeoutMs, deadline - performance.now())));
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
