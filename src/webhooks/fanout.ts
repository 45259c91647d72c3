import type { Clock } from '../clock.js';
import type { Config } from '../config/index.js';
import { type EventRecord, envelope, eventData } from '../events/event.js';
import type { FanoutLeader } from '../fleet/dispatch.js';
import { fanoutDeliveryId } from '../ids.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import type { EventTable } from '../store/events.js';
import type { DeliveryTable, FanoutCursorTable } from '../store/webhooks.js';
import { pendingDelivery } from './delivery.js';
import type { Dispatcher } from './dispatcher.js';
import type { EndpointService } from './endpoints.js';
import type { DeliveryRecord } from './records.js';

/** Events a gateway started again may raise again, under the same id: looked up before they are fanned out. */
const RAISED_AGAIN: ReadonlySet<string> = new Set(['slo.burn', 'consumer.quota.warning']);
/** The events traffic makes: as many as requests fail or are slow, whoever sends them. */
const TRAFFIC_EVENTS: ReadonlySet<string> = new Set(['wake.error', 'wake.slow']);
/** How many deliveries may wait when a traffic event is fanned out: a tenth of the queue is kept for the others. */
export const trafficBound = (max: number): number => Math.max(1, max - Math.ceil(max / 10));

/** How far back each poll rereads, for inserts that became visible late. */
const OVERLAP_MS = 3_000;
/**
 * With one instance, every event is recorded here and each recorded batch starts
 * a poll at once, so the timer only retries a poll that failed (a poll costs the
 * engine about a millisecond: four a second were 1.5% of a core while idle). On a
 * store only this process writes (the embedded engine) it runs only after a poll
 * that failed; on a ClickHouse server, which another process could write to, every
 * SOLO_POLL_MS.
 */
export const SOLO_POLL_MS = 5_000;
/**
 * An event recorded this much after it was raised may have a first row the fan-out read
 * and forgot (`seen` keeps 4 * OVERLAP_MS): it is checked against stored deliveries.
 * Events are recorded within a flush of being raised, so only a backlog (storage was
 * away) or a row raised again is checked; clocks apart by more than this check more.
 */
const LATE_MS = OVERLAP_MS;
/**
 * How far back the first poll reads when no cursor was ever saved; and the most a poll
 * reads back from the store's clock once it finds that clock behind the cursor.
 */
const STARTUP_LOOKBACK_MS = 120_000;
/** A clock put back is logged at most this often (a cluster's nodes disagreeing could say it each poll). */
const CLOCK_BACK_LOG_MS = 60_000;

export interface FanOutOptions {
  cfg: Pick<Config, 'webhooks'>;
  /** Where events are read from, by recording time. */
  events: Pick<EventTable, 'serverNow' | 'recordedAfter'>;
  /** Which events already have deliveries (made before this process started). */
  deliveries: Pick<DeliveryTable, 'existingPairs'>;
  endpoints: Pick<EndpointService, 'subscribers'> & Partial<Pick<EndpointService, 'poll'>>;
  /** Takes the new deliveries; how many it holds decides when new ones are shed. */
  dispatcher: Pick<Dispatcher, 'queued' | 'add'>;
  clock: Clock;
  log: Logger;
  metrics: Pick<Metrics, 'eventsShed'>;
  cursors: Pick<FanoutCursorTable, 'get' | 'set'>;
  /** A fleet's lead (one instance fans out at a time); null: alone. */
  leader: Pick<FanoutLeader, 'lead' | 'resign'> | null;
}

/**
 * Turns recorded events into deliveries: reads the events table by recording time
 * (so events raised on any instance, or with a past timestamp, are seen), and for
 * each event creates one delivery per enabled endpoint of its environment that
 * subscribed to its type (or to "*"), created at or before the event's time, and that
 * this instance dispatches for.
 * Events recorded before this process started may have been fanned out already
 * by the previous one, so those are checked against stored deliveries first.
 * When the queue is full, new deliveries are shed, counted and logged.
 */
export class FanOut {
  /**
   * Where the next poll reads from (less OVERLAP_MS): never past the store's clock as
   * the poll that moved it read it, and moved back to that clock when it is found
   * behind (put back), so rows stamped after the step are read.
   */
  private cursor = 0;
  /**
   * Rows recorded up to here may have been fanned out already (before the cursor was
   * moved back, or by an earlier process): one not in `seen` is checked against the
   * stored deliveries before it is fanned out.
   */
  private checkUpTo = Number.NEGATIVE_INFINITY;
  /** performance.now() when the last poll read the store's clock (a step of the wall clock does not move it). */
  private lastReadAt: number | null = null;
  private lastClockBackLog = Number.NEGATIVE_INFINITY;
  private readonly seen = new Map<string, number>();
  private startedAt = 0;
  private timer: NodeJS.Timeout | null = null;
  /** Polls only to retry one that failed (`start`'s `sole`): the retry's timer, while one waits. */
  private retryOnly = false;
  private retry: NodeJS.Timeout | null = null;
  private polling: Promise<void> | null = null;
  private again = false;
  private lastShedLog = 0;
  private savedCursor = 0;
  private shedCount = 0;

  constructor(private readonly o: FanOutOptions) {}

  /** Deliveries shed so far because the queue was full. */
  get shed(): number {
    return this.shedCount;
  }

  /** The one cursor: a fleet's instances take turns with it. */
  private readonly instance = 0;

  /**
   * Resumes from the saved cursor (or a short look-back on a first start). A saved
   * cursor ahead of the store's clock (the clock was put back since it was saved) is
   * not where rows are stamped now: it reads back as a first start does, checking
   * every row up to the saved cursor against the stored deliveries.
   */
  async init(): Promise<void> {
    this.startedAt = await this.o.events.serverNow();
    this.lastReadAt = performance.now();
    const saved = await this.o.cursors.get(this.instance);
    if (saved !== null) this.checkUpTo = Math.max(this.checkUpTo, saved);
    this.cursor = saved === null || saved > this.startedAt + OVERLAP_MS ? this.startedAt - STARTUP_LOOKBACK_MS : saved;
    this.savedCursor = saved ?? this.cursor;
  }

  /** Polls now (or right after the poll under way). */
  poll(): Promise<void> {
    if (this.polling) {
      this.again = true;
      return this.polling;
    }
    this.polling = (async () => {
      try {
        do {
          this.again = false;
          await this.pollOnce();
        } while (this.again);
      } catch (e) {
        this.o.log.warn('webhook fan-out poll failed; will retry', { err: e as Error });
        if (this.retryOnly) this.retryLater();
      } finally {
        this.polling = null;
      }
    })();
    return this.polling;
  }

  private async pollOnce(): Promise<void> {
    if (this.o.leader) {
      const { leading, gained } = await this.o.leader.lead();
      if (!leading) return;
      // Taken over: the last leader may have fanned out past the saved cursor; those are checked.
      if (gained) await this.init();
    }
    const now = await this.o.events.serverNow();
    const readAt = performance.now();
    if (now < this.cursor - OVERLAP_MS) this.rewind(now, readAt);
    this.lastReadAt = readAt;
    let pos = { t: this.cursor - OVERLAP_MS, id: '' };
    let refreshed = false;
    for (;;) {
      const page = await this.o.events.recordedAfter(pos.t, pos.id);
      // One row per event: an event raised again after a crash (its id derived from its
      // wake's, as a replayed segment's rules raise it) is a second row of the same id.
      const byId = new Map<string, (typeof page)[number]>();
      for (const e of page) if (!this.seen.has(e.id) && !byId.has(e.id)) byId.set(e.id, e);
      const fresh = [...byId.values()];
      if (fresh.length) {
        // Recorded, or raised, before this process started: an earlier one may have fanned it
        // out already. So may this one have, for an event recorded well after it was raised:
        // its first row may be older than `seen` remembers (raised again by a restart's
        // replayed segment, on any instance of a fleet).
        // So may a gateway started again within an hour have, for an SLO burn or a quota
        // warning its rules raised again under the same id (their memory is not kept).
        // So may it have, for one recorded up to where the cursor was before the store's
        // clock was put back (a row stamped as an earlier one was, and `seen` forgot it).
        const early = fresh
          .filter(
            (e) =>
              e.recorded_at < this.startedAt ||
              e.recorded_at <= this.checkUpTo ||
              e.created_at < this.startedAt ||
              e.recorded_at - e.created_at > LATE_MS ||
              RAISED_AGAIN.has(e.type),
          )
          .map((e) => e.id);
        const done = early.length ? await this.o.deliveries.existingPairs(early) : new Set<string>();
        // The endpoints as storage has them now: in a fleet this instance's copy can be behind
        // (an endpoint registered on another instance moments before the event), and an event
        // fanned out is never read again. A failed read leaves the copy as it was.
        if (!refreshed && this.o.endpoints.poll) {
          refreshed = true;
          await this.o.endpoints.poll();
        }
        await this.fanOut(fresh, done);
      }
      // Only now, with the deliveries written, are these events done: a failure above
      // leaves them to be read again by the next poll.
      // The cursor goes no further than the store's clock read at the start: rows stamped
      // ahead of it (recorded before the clock was put back) would carry it past rows
      // stamped from now on.
      for (const e of page) {
        if (!this.seen.has(e.id)) this.seen.set(e.id, e.recorded_at);
        const t = Math.min(e.recorded_at, now);
        if (t > this.cursor) this.cursor = t;
      }
      const last = page[page.length - 1];
      // Pages past the store's clock hold rows stamped ahead of it: read again by the next
      // poll, they would be read by each one until the clock catches up.
      if (!last || page.length < 2000 || last.recorded_at > now) break;
      pos = { t: last.recorded_at, id: last.id };
    }
    for (const [id, t] of this.seen) if (t < this.cursor - 4 * OVERLAP_MS) this.seen.delete(id);
    if (this.cursor > this.savedCursor) {
      // Saved after the deliveries are written: a crash rereads (and deduplicates), never skips.
      await this.o.cursors.set(this.instance, this.cursor, this.o.clock.now());
      this.savedCursor = this.cursor;
    }
  }

  /**
   * The store's clock (`now`) is behind the cursor by more than the overlap: it was put
   * back (NTP stepped it, a VM's clock was corrected), so rows are stamped behind where
   * reading got, and would be skipped for good. Reading goes back to where rows may have
   * been stamped since the last poll read the clock (at most STARTUP_LOOKBACK_MS), and
   * every row up to the old cursor is checked against the stored deliveries (some were
   * fanned out before the step). The saved cursor stays until reading passes it.
   */
  private rewind(now: number, readAt: number): void {
    const since = this.lastReadAt === null ? STARTUP_LOOKBACK_MS : readAt - this.lastReadAt;
    const from = now - Math.min(Math.max(0, since), STARTUP_LOOKBACK_MS);
    const wall = this.o.clock.now();
    if (wall - this.lastClockBackLog > CLOCK_BACK_LOG_MS || wall < this.lastClockBackLog) {
      this.lastClockBackLog = wall;
      this.o.log.warn('webhook fan-out: the store clock is behind the events read (it was put back); reading back', {
        behind_ms: this.cursor - now,
        from: new Date(from).toISOString(),
      });
    }
    this.checkUpTo = Math.max(this.checkUpTo, this.cursor);
    this.cursor = from;
  }

  private async fanOut(events: EventRecord[], done: Set<string>): Promise<void> {
    const now = this.o.clock.now();
    const max = this.o.cfg.webhooks.retry_schedule_s.length + 1;
    const rows: DeliveryRecord[] = [];
    let shedNow = 0;
    for (const e of events) {
      const except =
        e.type === 'webhook.disabled'
          ? ((eventData(e).endpoint as { id?: string } | undefined)?.id ?? undefined)
          : undefined;
      const targets = this.o.endpoints.subscribers({
        environment: e.environment,
        type: e.type,
        raised: e.created_at,
        now,
        except,
      });
      if (targets.length === 0) continue;
      const body = envelope(e);
      // Events that traffic makes (a flood of failing or slow requests, anyone's) may fill
      // the queue only to its traffic bound: the rest is kept for those of keys, endpoints,
      // quotas, SLOs and replays, so a storm never sheds a key's revocation.
      const bound = TRAFFIC_EVENTS.has(e.type)
        ? trafficBound(this.o.cfg.webhooks.max_queued_events)
        : this.o.cfg.webhooks.max_queued_events;
      for (const ep of targets) {
        if (done.has(`${e.id}|${ep.id}`)) continue;
        if (this.o.dispatcher.queued + rows.length >= bound) {
          shedNow++;
          this.o.metrics.eventsShed.labels(e.type).inc();
          continue;
        }
        rows.push(
          pendingDelivery(
            {
              environment: e.environment,
              endpoint_id: ep.id,
              event_id: e.id,
              event_type: e.type,
              payload: body,
              max_attempts: max,
            },
            now,
            // One id for this event and endpoint, whoever writes it (see fanoutDeliveryId).
            fanoutDeliveryId(e.created_at, e.id, ep.id),
          ),
        );
      }
    }
    // A fleet's leader that lost the lead meanwhile (paused past it) writes nothing: the
    // new leader fans these events out. Checked right before writing, the window is a
    // round trip, not a poll.
    if (this.o.leader && rows.length > 0 && !(await this.o.leader.lead()).leading)
      throw new Error('the fan-out lead passed to another instance');
    const taken = await this.o.dispatcher.add(rows);
    // The room was taken meanwhile (a test send, a replay): the rest are shed as well.
    for (const d of rows.slice(taken)) {
      shedNow++;
      this.o.metrics.eventsShed.labels(d.event_type).inc();
    }
    if (shedNow > 0) {
      this.shedCount += shedNow;
      if (now - this.lastShedLog > 10_000) {
        this.lastShedLog = now;
        this.o.log.warn('webhook queue full: deliveries shed (the events stay recorded)', {
          shed_now: shedNow,
          shed_total: this.shedCount,
          queued: this.o.dispatcher.queued,
        });
      }
    }
  }

  /**
   * Polls on a timer as well as whenever this instance records events: every
   * `everyMs` when other instances record events too (they are seen only by
   * polling), else every `SOLO_POLL_MS`, a safety net for a poll that failed. Alone on
   * a store no other process writes (`sole`: the embedded engine, its directory held by
   * this process), every event is recorded here: it polls now, then only as it records
   * events and, after a poll that failed, every `SOLO_POLL_MS` until one succeeds.
   */
  start(everyMs = 250, alone = false, sole = false): void {
    if (alone && sole) {
      this.retryOnly = true;
      void this.poll();
      return;
    }
    this.timer = setInterval(() => void this.poll(), alone ? SOLO_POLL_MS : everyMs);
    this.timer.unref();
  }

  /** A poll `SOLO_POLL_MS` from now, unless one is already waiting. */
  private retryLater(): void {
    if (this.retry !== null) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      void this.poll();
    }, SOLO_POLL_MS);
    this.retry.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.retryOnly = false;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    if (this.polling) await this.polling;
    await this.o.leader?.resign();
  }
}
