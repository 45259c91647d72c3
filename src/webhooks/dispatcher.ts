import type { Clock } from '../clock.js';
import type { Config } from '../config/index.js';
import { GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import { longestWait, retryDelay, scheduleEnd, waitBefore } from './backoff.js';
import type { EndpointService } from './endpoints.js';
import type { DeliveryQueue } from './queue.js';
import type { DeliveryRecord } from './records.js';
import { type Send, utf8Prefix } from './sender.js';

/** What a refused test send or replay asks to wait (s): deliveries leave the queue as they end. */
export const QUEUE_FULL_RETRY_S = 30;

/** The API's answer to a delivery the queue has no room for (a test send, a replay): nothing was stored. */
export const queueFull = (): GatewayError =>
  new GatewayError(
    'service_unavailable',
    'the webhook queue holds its most deliveries (webhooks.max_queued_events); nothing was sent or stored: retry shortly',
    null,
    QUEUE_FULL_RETRY_S,
  );

/** How long a start waits for the write-ahead log's outcomes to go into storage before resuming without them. */
const LOG_REPLAY_WAIT_MS = 15_000;

export interface DispatcherOptions {
  cfg: Pick<Config, 'webhooks'>;
  /** Where deliveries wait and outcomes go: LocalQueue alone, FleetQueue in a fleet. */
  queue: DeliveryQueue;
  /** Whether an endpoint still takes deliveries, and its health (the 410 rule). */
  endpoints: Pick<EndpointService, 'get' | 'recordAnswer'> & Partial<Pick<EndpointService, 'poll'>>;
  send: Send;
  clock: Clock;
  log: Logger;
  metrics: Pick<Metrics, 'deliveries' | 'deliveryLatency' | 'deliveryQueue' | 'deliveryOldest'>;
  /** Draws the retry jitter (tests pin it). */
  random?: () => number;
}

/**
 * Runs delivery attempts: takes what is due from its queue within the caps (at
 * most `max_per_endpoint` per endpoint and `max_concurrency` for each environment), sends each,
 * and hands the queue the outcome, with the next attempt's time from the backoff
 * schedule. A delivery is written before its first attempt. After a restart,
 * unfinished deliveries resume on their schedule; an attempt whose outcome was not
 * yet written is made again under the same attempt number, never counted twice.
 */
/** The note of a delivery ended because its endpoint was deleted (DELETE /v2/webhooks/endpoints/{id}). */
export const ENDPOINT_DELETED = 'endpoint deleted';

/** How often the endpoints are read again at most before deliveries are ended for an endpoint not enabled. */
const ENDPOINTS_READ_EVERY_MS = 1000;

export class Dispatcher {
  private readonly o: DispatcherOptions;
  private readonly queue: DeliveryQueue;
  private readonly random: () => number;
  /** Deliveries sent again by hand while being attempted: the note their outcome ends with. */
  private readonly superseded = new Map<string, string>();
  private inflight = 0;
  /** Deliveries taken by `add` and still being written (they count against the bound). */
  private adding = 0;
  /** Attempts settled (their delivery back in the queue, or ended) that still hold their slot: counted once. */
  private settledInSlot = 0;
  private readonly perEndpoint = new Map<string, number>();
  /** Attempts running for each environment's endpoints (at most max_concurrency each). */
  private readonly perEnvironment = new Map<string, number>();
  private readonly active = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  /** The tick's period once started (null before). */
  private everyMs: number | null = null;
  private stopped = false;
  /** The endpoints' read before ending a delivery unsent (endpointsRead): the one running, and when the last began. */
  private reading: Promise<void> | null = null;
  private readAt = Number.NEGATIVE_INFINITY;

  constructor(o: DispatcherOptions) {
    this.o = o;
    this.queue = o.queue;
    this.random = o.random ?? Math.random;
  }

  /** Deliveries waiting for an attempt, plus those being attempted or being written by `add`. */
  get queued(): number {
    return this.queue.waiting + this.inflight - this.settledInSlot + this.adding;
  }

  /** How many more deliveries `add` takes now: `max_queued_events` less those held. */
  room(): number {
    return Math.max(0, this.o.cfg.webhooks.max_queued_events - this.queued);
  }

  /** Age in ms of the most overdue pending delivery (0 when none is due). */
  oldestPendingMs(): number {
    return this.queue.overdueMs();
  }

  /** Ends every delivery waiting for this endpoint (it was deleted): dead-lettered, with `reason`. */
  cancel(endpointId: string, reason: string): number {
    const ended = this.queue.withdraw(endpointId);
    for (const d of ended) {
      this.queue.record({ ...d, status: 'dead_lettered', next_attempt_at: null, response_body: reason });
      this.o.metrics.deliveries.labels('dead_lettered').inc();
    }
    return ended.length;
  }

  /**
   * A failed delivery sent again by hand (POST .../replay): its own retries end here
   * (the new delivery is its next attempt), so the receiver does not get the event
   * twice. A retry waiting in the queue is taken out and recorded as ended; one
   * being attempted now is not scheduled again.
   */
  supersede(d: DeliveryRecord, by: string): void {
    // The API's word for the new delivery is a replay (is_replay, replay_of): the note says so.
    const note = `superseded by the replay ${by}`;
    this.superseded.set(d.id, note);
    const waiting = this.queue.end(d);
    if (waiting === null) return;
    this.superseded.delete(d.id);
    this.queue.record({ ...waiting, next_attempt_at: null, response_body: note });
  }

  /**
   * Loads unfinished deliveries (after a restart). The outcomes the write-ahead log
   * holds from the earlier run (storage down at its stop, or a crash before their
   * insert) go into storage first: read without them, a delivered delivery would be
   * sent again and a dead-lettered one start over. Storage refusing them (or not
   * answering within LOG_REPLAY_WAIT_MS) does not hold the start: the log keeps
   * them and retries, and what storage has is resumed.
   */
  async resume(): Promise<number> {
    this.queue.resumeLog();
    let timer: NodeJS.Timeout | undefined;
    const replayed = await Promise.race([
      this.queue.flush().then(() => true),
      new Promise<false>((r) => {
        timer = setTimeout(() => r(false), LOG_REPLAY_WAIT_MS);
        timer.unref();
      }),
    ]).finally(() => clearTimeout(timer));
    if (!replayed)
      this.o.log.warn('webhook outcomes of the earlier run not yet stored; resuming deliveries without them', {
        waited_ms: LOG_REPLAY_WAIT_MS,
      });
    const n = await this.queue.resume();
    if (n) this.o.log.info('webhook deliveries resumed', { count: n });
    return n;
  }

  /**
   * Persists new deliveries, then schedules them: at most `room()` of them (the
   * first ones), so no more than `max_queued_events` ever wait, whoever adds them
   * (fan-out, a test send, a replay). Returns how many it took; the others are not
   * stored, and the caller sheds them (fan-out) or refuses the request (the API).
   * The bound is checked before the first await: a caller that saw room() > 0 in
   * the same synchronous run gets its delivery taken.
   */
  async add(rows: DeliveryRecord[], stored?: () => void): Promise<number> {
    const room = this.room();
    const take = rows.length <= room ? rows : rows.slice(0, room);
    if (take.length === 0) return 0;
    this.adding += take.length;
    try {
      await this.queue.add(take);
    } finally {
      this.adding -= take.length;
    }
    // What must follow their being stored, before any attempt is started (a replay's original superseded).
    stored?.();
    this.tick();
    return take.length;
  }

  /** Starts every attempt that is due, within the caps. */
  tick(): void {
    if (this.stopped) return;
    const w = this.o.cfg.webhooks;
    // Places are counted per environment: a sandbox's receivers that hang never hold production's.
    const reserve = (d: DeliveryRecord): boolean => {
      const n = this.perEndpoint.get(d.endpoint_id) ?? 0;
      const inEnv = this.perEnvironment.get(d.environment) ?? 0;
      if (inEnv >= w.max_concurrency || n >= w.max_per_endpoint) return false;
      this.inflight++;
      this.perEndpoint.set(d.endpoint_id, n + 1);
      this.perEnvironment.set(d.environment, inEnv + 1);
      return true;
    };
    const now = this.o.clock.now();
    this.retime(now);
    for (const d of this.queue.due(now, reserve)) this.run(d);
    if (this.timer === null && this.everyMs !== null && this.queued > 0) this.watch(this.everyMs);
  }

  /**
   * A due time is a time of day: one set while the clock was ahead (a VM started with it
   * days out, then NTP put it right) would hold its retry back by as much. A delivery due
   * further ahead than any wait the schedule gives (`longestWait`) is due again its own
   * wait from now (`waitBefore`): never sooner than the schedule with a correct clock.
   */
  private retime(now: number): void {
    const w = this.o.cfg.webhooks;
    const moved =
      this.queue.retime?.(
        now,
        longestWait(w.retry_schedule_s, w.jitter),
        (d) => now + waitBefore(d, w.retry_schedule_s, w.jitter),
      ) ?? 0;
    if (moved > 0)
      this.o.log.warn('webhook retries due further ahead than the schedule allows (the clock was put back): moved', {
        deliveries: moved,
      });
  }

  /**
   * The endpoints read again from storage, at most once a second (the deliveries of a
   * disabled endpoint falling due together share one read).
   */
  private endpointsRead(): Promise<void> {
    const poll = this.o.endpoints.poll;
    if (!poll) return Promise.resolve();
    if (this.reading) return this.reading;
    const now = this.o.clock.now();
    if (now - this.readAt < ENDPOINTS_READ_EVERY_MS && now >= this.readAt) return Promise.resolve();
    this.readAt = now;
    this.reading = poll.call(this.o.endpoints).finally(() => {
      this.reading = null;
    });
    return this.reading;
  }

  /** Attempts `d`, for which `tick` reserved room. */
  private run(d: DeliveryRecord): void {
    const slot = { settled: false };
    const p: Promise<void> = this.attempt(d, slot)
      .catch((e: Error) => this.o.log.error('delivery attempt failed unexpectedly', { delivery_id: d.id, err: e }))
      .finally(() => {
        if (slot.settled) this.settledInSlot--;
        this.inflight--;
        const n = (this.perEndpoint.get(d.endpoint_id) ?? 1) - 1;
        if (n === 0) this.perEndpoint.delete(d.endpoint_id);
        else this.perEndpoint.set(d.endpoint_id, n);
        const e = (this.perEnvironment.get(d.environment) ?? 1) - 1;
        if (e === 0) this.perEnvironment.delete(d.environment);
        else this.perEnvironment.set(d.environment, e);
        this.active.delete(p);
        this.tick();
      });
    this.active.add(p);
  }

  /**
   * Hands the queue an outcome, and marks `slot` settled: the queue holds a retry
   * again from the call on (both queues put it back before their first await).
   */
  private async settle(outcome: DeliveryRecord, slot: { settled: boolean }): Promise<void> {
    const settling = this.queue.settle(outcome);
    slot.settled = true;
    this.settledInSlot++;
    await settling;
  }

  private async attempt(taken: DeliveryRecord, slot: { settled: boolean }): Promise<void> {
    const d = await this.queue.claim(taken);
    if (d === null) return;
    const { endpoints, metrics, clock, log } = this.o;
    let ep = endpoints.get(d.endpoint_id);
    // This instance's copy may be behind storage (another instance of a fleet enabled the
    // endpoint, or made it, since the last read): read again before a delivery is ended unsent.
    if (ep?.status !== 'enabled') {
      await this.endpointsRead();
      ep = endpoints.get(d.endpoint_id);
    }
    if (!ep || ep.status !== 'enabled') {
      await this.settle(
        {
          ...d,
          status: 'dead_lettered',
          next_attempt_at: null,
          response_body: ep?.status === 'deleted' ? ENDPOINT_DELETED : 'endpoint disabled',
        },
        slot,
      );
      metrics.deliveries.labels('dead_lettered').inc();
      return;
    }
    const n = d.attempt + 1;
    const out = await this.o.send(d, n, clock.now());
    const after = clock.now();
    metrics.deliveryLatency.observe(out.durationMs / 1000);
    const base = {
      ...d,
      attempt: n,
      response_status: out.status,
      response_body: utf8Prefix(out.error ?? out.body),
      duration_ms: out.durationMs,
      attempt_log: {
        attempt: n,
        at: after,
        response_status: out.status,
        duration_ms: out.durationMs,
        error: out.error,
        response_body: utf8Prefix(out.body),
      },
    };
    let next: DeliveryRecord;
    if (out.ok) {
      next = { ...base, status: 'delivered', next_attempt_at: null };
      metrics.deliveries.labels('delivered').inc();
    } else if (endpoints.get(d.endpoint_id)?.status === 'deleted') {
      // The endpoint was deleted while this attempt ran (the deliveries waiting for it ended
      // then; this one was not waiting): it ends as they did, and is never sent again.
      next = { ...base, status: 'dead_lettered', next_attempt_at: null, response_body: ENDPOINT_DELETED };
      metrics.deliveries.labels('dead_lettered').inc();
    } else if (n >= d.max_attempts) {
      next = { ...base, status: 'dead_lettered', next_attempt_at: null };
      metrics.deliveries.labels('dead_lettered').inc();
      log.warn('webhook delivery dead-lettered', { delivery_id: d.id, endpoint_id: d.endpoint_id, attempts: n });
    } else {
      const w = this.o.cfg.webhooks;
      const wait = retryDelay({
        next: n + 1,
        scheduleS: w.retry_schedule_s,
        jitter: w.jitter,
        random: this.random,
        retryAfterS: out.retryAfter,
        // A Retry-After never carries the next attempt past the schedule's last one.
        latestMs: scheduleEnd(d.created_at, d.max_attempts, w.retry_schedule_s) - after,
      });
      next = { ...base, status: 'failed', next_attempt_at: after + wait };
      metrics.deliveries.labels('failed').inc();
      log.info('webhook attempt failed; retrying', {
        delivery_id: d.id,
        endpoint_id: d.endpoint_id,
        attempt: `${n}/${d.max_attempts}`,
        response_status: out.status,
        error: out.error,
        next_attempt_at: new Date(after + wait).toISOString(),
      });
    }
    const note = this.superseded.get(d.id);
    if (note !== undefined && next.status === 'failed') {
      // Sent again by hand while this attempt ran: no retry of its own.
      this.superseded.delete(d.id);
      next = { ...next, next_attempt_at: null, response_body: note };
    }
    await this.settle(next, slot);
    await endpoints.recordAnswer(d.endpoint_id, out.status, after);
  }

  /** Writes every recorded outcome (or spools it while storage fails). */
  flushWrites(): Promise<void> {
    return this.queue.flush();
  }

  /** Resolves when no attempt is running and every outcome is written. */
  async idle(): Promise<void> {
    while (this.active.size > 0) await Promise.all([...this.active]);
    await this.flushWrites();
  }

  /**
   * Ticks every `everyMs` while deliveries wait or are attempted (their times pass on
   * the clock, which tells nothing), and not while none do: every delivery enters
   * through a tick (added, resumed, found by the fleet's queue, or retried after an
   * attempt), which starts the timer again.
   */
  start(everyMs = 50): void {
    this.everyMs = everyMs;
    this.queue.start(() => this.tick());
    this.watch(everyMs);
  }

  private watch(everyMs: number): void {
    if (this.stopped) return;
    const { metrics } = this.o;
    this.timer = setInterval(() => {
      this.tick();
      metrics.deliveryQueue.set(this.queued);
      metrics.deliveryOldest.set(this.oldestPendingMs() / 1000);
      if (this.queued === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = null;
      }
    }, everyMs);
    this.timer.unref();
  }

  /** Stops starting attempts, waits for the running ones, writes their outcomes. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.queue.stop();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.idle();
  }
}
