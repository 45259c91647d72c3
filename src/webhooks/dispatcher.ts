import { Batcher } from '../capture/batcher.js';
import type { Wal } from '../capture/wal.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config/index.js';
import type { Claim, DeliveryLeases } from '../fleet/dispatch.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import type { DeliveryTable } from '../store/webhooks.js';
import { retryDelay } from './backoff.js';
import type { EndpointService } from './endpoints.js';
import { MinHeap } from './heap.js';
import type { DeliveryRecord } from './records.js';
import { type AttemptOutcome, MAX_STORED_BODY, sendAttempt } from './sender.js';

/** A fleet's instances look for deliveries to take over this often, this far ahead. */
const SCAN_EVERY_MS = 2000;
const SCAN_AHEAD_MS = 5000;

export type Send = (d: DeliveryRecord, attemptNo: number, nowMs: number) => Promise<AttemptOutcome>;

/**
 * Schedules and runs delivery attempts. What is due comes from a min-heap of
 * deliveries by next_attempt_at; sending is a separate function. A delivery is
 * written before its first attempt; each outcome is written back (in small
 * batches). After a restart, unfinished deliveries are loaded and resume on their
 * schedule; an attempt whose outcome was not yet written is made again under the
 * same attempt number, never counted twice.
 */
export class Dispatcher {
  /** Waiting deliveries, one queue per endpoint, so the per-endpoint cap costs nothing to respect. */
  private readonly queues = new Map<string, MinHeap<DeliveryRecord>>();
  private waiting = 0;
  private rotate = 0;
  /** Deliveries replayed by hand while being attempted: the note their outcome ends with. */
  private readonly superseded = new Map<string, string>();
  private inflight = 0;
  private readonly perEndpoint = new Map<string, number>();
  private readonly active = new Set<Promise<void>>();
  /** Outcomes are written in batches, and spooled to disk while storage fails, like wakes. */
  private readonly outcomes: Batcher<DeliveryRecord>;
  private timer: NodeJS.Timeout | null = null;
  private scanTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  /** Ids waiting or being attempted here (a fleet's scan adds only the others). */
  private readonly known = new Set<string>();
  /** Outcomes Redis has not heard of yet (it was unreachable when they were made). */
  private unreleased: DeliveryRecord[] = [];
  random: () => number = Math.random;
  /** A fleet's shared queue (coordination.redis_url): attempts under leases. Null: alone. */
  leases: DeliveryLeases | null = null;
  send: Send;

  constructor(
    private readonly cfg: Pick<Config, 'webhooks'>,
    private readonly table: DeliveryTable,
    private readonly endpoints: EndpointService,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    spool: Wal<DeliveryRecord> | null = null,
  ) {
    const w = cfg.webhooks;
    this.outcomes = new Batcher<DeliveryRecord>(
      { batchRows: 1000, flushIntervalMs: 50, maxBufferedRows: 1_000_000 },
      (rows) => this.table.put(rows),
      spool,
      log,
    );
    this.send = (d, n, nowMs) => {
      const ep = this.endpoints.get(d.endpoint_id);
      if (!ep)
        return Promise.resolve({
          ok: false,
          status: 0,
          body: '',
          durationMs: 0,
          retryAfter: null,
          error: 'endpoint gone',
        });
      return sendAttempt(d, ep, n, {
        timeoutMs: w.timeout_ms,
        allowPrivate: w.allow_private_networks,
        allowInsecure: w.allow_insecure_http,
        nowMs,
      });
    };
  }

  /** Deliveries waiting for an attempt, plus those being attempted. */
  get queued(): number {
    return this.waiting + this.inflight;
  }

  private enqueue(d: DeliveryRecord): void {
    let q = this.queues.get(d.endpoint_id);
    if (!q) {
      q = new MinHeap<DeliveryRecord>((x) => x.next_attempt_at ?? 0);
      this.queues.set(d.endpoint_id, q);
    }
    q.push(d);
    this.known.add(d.id);
    this.waiting++;
  }

  /** Age in ms of the most overdue pending delivery (0 when none is due). */
  oldestPendingMs(): number {
    let oldest = Number.POSITIVE_INFINITY;
    for (const q of this.queues.values()) {
      const t = q.peek()?.next_attempt_at;
      if (t !== null && t !== undefined && t < oldest) oldest = t;
    }
    return oldest === Number.POSITIVE_INFINITY ? 0 : Math.max(0, this.clock.now() - oldest);
  }

  /** Ends every delivery waiting for this endpoint (it was deleted): dead-lettered, with `reason`. */
  cancel(endpointId: string, reason: string): number {
    const q = this.queues.get(endpointId);
    if (!q) return 0;
    let n = 0;
    for (let d = q.pop(); d !== undefined; d = q.pop()) {
      this.waiting--;
      this.known.delete(d.id);
      n++;
      this.finish({ ...d, status: 'dead_lettered', next_attempt_at: null, response_body: reason });
      this.metrics.deliveries.labels('dead_lettered').inc();
    }
    if (!this.perEndpoint.has(endpointId)) this.queues.delete(endpointId);
    return n;
  }

  /**
   * A failed delivery replayed by hand: its own retries end here (the replay is its
   * next attempt), so the receiver does not get the event twice. A retry waiting in
   * the queue is taken out and recorded as ended; one being attempted now is not
   * scheduled again.
   */
  supersede(d: DeliveryRecord, by: string): void {
    const note = `superseded by the replay ${by}`;
    this.superseded.set(d.id, note);
    // In a fleet another instance may hold it: it ends there too (at its next claim or release).
    if (this.leases)
      void this.leases
        .cancel(d.id)
        .catch((e: Error) =>
          this.log.warn('a replayed delivery may be attempted once more', { delivery_id: d.id, err: e }),
        );
    const q = this.queues.get(d.endpoint_id);
    if (!q) return;
    const keep: DeliveryRecord[] = [];
    for (let x = q.pop(); x !== undefined; x = q.pop()) {
      if (x.id === d.id) {
        this.waiting--;
        this.superseded.delete(d.id);
        this.finish({ ...x, next_attempt_at: null, response_body: note });
      } else keep.push(x);
    }
    for (const x of keep) q.push(x);
  }

  /** Starts inserting the outcomes the log holds from an earlier run. */
  resumeLog(): void {
    this.outcomes.resume();
  }

  /**
   * Loads unfinished deliveries (after a restart). In a fleet, Redis holds the queue:
   * storage fills it when Redis holds none (the fleet's first start, or Redis restarted
   * empty), then every instance takes what is due.
   */
  async resume(): Promise<number> {
    let n = 0;
    if (this.leases === null) {
      for (const d of await this.table.unfinished()) {
        this.enqueue(d);
        n++;
      }
    } else n = await this.scan();
    if (n) this.log.info('webhook deliveries resumed', { count: n });
    return n;
  }

  /** A fleet's deliveries due soon that this instance does not hold yet (any instance's, a dead one's too). */
  async scan(): Promise<number> {
    if (!this.leases || this.stopped) return 0;
    let n = 0;
    try {
      for (const d of this.unreleased.splice(0)) {
        if ((await this.leases.release(d).catch(() => null)) === null) this.unreleased.push(d);
      }
      if (await this.leases.unseeded()) {
        const rows = await this.table.unfinished();
        await this.leases.add(rows);
        await this.leases.seeded();
        for (const d of rows) {
          if (this.known.has(d.id)) continue;
          this.enqueue(d);
          n++;
        }
      }
      // Redis names what is due; what each delivery is (payload, endpoint, attempts allowed) is storage's.
      const ids = (await this.leases.due(this.clock.now() + SCAN_AHEAD_MS)).filter((id) => !this.known.has(id));
      for (const d of await this.table.unfinishedAmong(ids)) {
        if (this.known.has(d.id)) continue;
        this.enqueue(d);
        n++;
      }
    } catch (e) {
      this.log.debug('webhook queue scan failed (Redis or storage unavailable)', { err: e as Error });
    }
    if (n) this.tick();
    return n;
  }

  /** Persists new deliveries, then schedules them. */
  async add(rows: DeliveryRecord[]): Promise<void> {
    if (rows.length === 0) return;
    await this.table.put(rows);
    if (this.leases) await this.leases.add(rows);
    for (const d of rows) this.enqueue(d);
    this.tick();
  }

  /**
   * Starts every attempt that is due, within the caps: at most `max_per_endpoint`
   * per endpoint and `max_concurrency` in all. Endpoints take turns (the starting
   * endpoint rotates), so a busy one cannot starve the others.
   */
  tick(): void {
    if (this.stopped) return;
    const now = this.clock.now();
    const w = this.cfg.webhooks;
    const ids = [...this.queues.keys()];
    const n = ids.length;
    if (n === 0) return;
    this.rotate = (this.rotate + 1) % n;
    for (let k = 0; k < n && this.inflight < w.max_concurrency; k++) {
      const id = ids[(this.rotate + k) % n] as string;
      const q = this.queues.get(id) as MinHeap<DeliveryRecord>;
      while (this.inflight < w.max_concurrency && (this.perEndpoint.get(id) ?? 0) < w.max_per_endpoint) {
        const d = q.peek();
        if (!d || (d.next_attempt_at ?? 0) > now) break;
        q.pop();
        this.waiting--;
        this.run(d);
      }
      if (q.size === 0 && !this.perEndpoint.has(id)) this.queues.delete(id);
    }
  }

  private run(d: DeliveryRecord): void {
    this.inflight++;
    this.perEndpoint.set(d.endpoint_id, (this.perEndpoint.get(d.endpoint_id) ?? 0) + 1);
    const p: Promise<void> = this.attempt(d)
      .catch((e: Error) => this.log.error('delivery attempt failed unexpectedly', { delivery_id: d.id, err: e }))
      .finally(() => {
        this.inflight--;
        const n = (this.perEndpoint.get(d.endpoint_id) ?? 1) - 1;
        if (n === 0) this.perEndpoint.delete(d.endpoint_id);
        else this.perEndpoint.set(d.endpoint_id, n);
        this.active.delete(p);
        this.tick();
      });
    this.active.add(p);
  }

  private async attempt(queued: DeliveryRecord): Promise<void> {
    let d = queued;
    if (this.leases) {
      let c: Claim;
      try {
        c = await this.leases.claim(d, this.clock.now());
      } catch {
        // Redis unreachable: no attempt without a lease; try again in a second.
        this.enqueue({ ...d, next_attempt_at: this.clock.now() + 1000 });
        return;
      }
      if (!c.ok) {
        this.known.delete(d.id);
        // Not due yet in the fleet's state (another instance attempted it): wait for that time.
        if (c.next) this.enqueue(c.next);
        return;
      }
      d = c.d;
    }
    const ep = this.endpoints.get(d.endpoint_id);
    const w = this.cfg.webhooks;
    if (!ep || ep.status !== 'enabled') {
      await this.done({ ...d, status: 'dead_lettered', next_attempt_at: null, response_body: 'endpoint disabled' });
      this.metrics.deliveries.labels('dead_lettered').inc();
      return;
    }
    const n = d.attempt + 1;
    const out = await this.send(d, n, this.clock.now());
    const after = this.clock.now();
    this.metrics.deliveryLatency.observe(out.durationMs / 1000);
    const base = {
      ...d,
      attempt: n,
      response_status: out.status,
      response_body: (out.error ?? out.body).slice(0, MAX_STORED_BODY),
      duration_ms: out.durationMs,
      attempt_log: {
        attempt: n,
        at: after,
        response_status: out.status,
        duration_ms: out.durationMs,
        error: out.error,
        response_body: out.body.slice(0, MAX_STORED_BODY),
      },
    };
    let next: DeliveryRecord;
    if (out.ok) {
      next = { ...base, status: 'delivered', next_attempt_at: null };
      this.metrics.deliveries.labels('delivered').inc();
    } else if (n >= d.max_attempts) {
      next = { ...base, status: 'dead_lettered', next_attempt_at: null };
      this.metrics.deliveries.labels('dead_lettered').inc();
      this.log.warn('webhook delivery dead-lettered', { delivery_id: d.id, endpoint_id: d.endpoint_id, attempts: n });
    } else {
      const wait = retryDelay(n + 1, w.retry_schedule_s, w.jitter, this.random, out.retryAfter);
      next = { ...base, status: 'failed', next_attempt_at: after + wait };
      this.metrics.deliveries.labels('failed').inc();
      this.log.info('webhook attempt failed; retrying', {
        delivery_id: d.id,
        endpoint_id: d.endpoint_id,
        attempt: `${n}/${d.max_attempts}`,
        response_status: out.status,
        error: out.error,
        next_attempt_at: new Date(after + wait).toISOString(),
      });
    }
    const replaced = this.superseded.get(d.id);
    if (replaced !== undefined && next.status === 'failed') {
      // Replayed by hand while this attempt ran: no retry of its own.
      this.superseded.delete(d.id);
      next = { ...next, next_attempt_at: null, response_body: replaced };
    }
    await this.done(next);
    await this.endpoints.recordAnswer(d.endpoint_id, out.status, after);
  }

  /** An attempt's outcome: written, queued again when it will be retried, and the fleet's lease ended. */
  private async done(next: DeliveryRecord): Promise<void> {
    this.finish(next);
    if (next.status === 'failed' && next.next_attempt_at !== null) this.enqueue(next);
    else this.known.delete(next.id);
    if (!this.leases) return;
    const ok = await this.leases.release(next).catch(() => null);
    if (ok === null) this.unreleased.push(next);
    else if (!ok) this.log.warn('webhook delivery lease expired during its attempt', { delivery_id: next.id });
  }

  private finish(d: DeliveryRecord): void {
    d.updated_at = Math.max(this.clock.now(), d.updated_at + 1);
    this.outcomes.push(d);
  }

  /** Writes every recorded outcome (or spools it while storage fails). */
  flushWrites(): Promise<void> {
    return this.outcomes.flush();
  }

  /** Resolves when no attempt is running and every outcome is written. */
  async idle(): Promise<void> {
    while (this.active.size > 0) await Promise.all([...this.active]);
    await this.flushWrites();
  }

  start(everyMs = 50): void {
    if (this.leases) {
      this.scanTimer = setInterval(() => void this.scan(), SCAN_EVERY_MS);
      this.scanTimer.unref();
    }
    this.timer = setInterval(() => {
      this.tick();
      this.metrics.deliveryQueue.set(this.queued);
      this.metrics.deliveryOldest.set(this.oldestPendingMs() / 1000);
    }, everyMs);
    this.timer.unref();
  }

  /** Stops starting attempts, waits for the running ones, writes their outcomes. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    if (this.scanTimer) clearInterval(this.scanTimer);
    this.timer = null;
    this.scanTimer = null;
    await this.idle();
  }
}
