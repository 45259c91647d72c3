import { Outcomes, type OutcomesOptions } from '../webhooks/outcomes.js';
import type { DeliveryQueue, DeliveryRows } from '../webhooks/queue.js';
import { type DeliveryRecord, rescheduled } from '../webhooks/records.js';
import { Waiting } from '../webhooks/waiting.js';
import { type DeliveryLeases, withState } from './dispatch.js';

/** A fleet's instances look for deliveries to take over this often, this far ahead. */
const SCAN_EVERY_MS = 2000;
const SCAN_AHEAD_MS = 5000;
/** A scan reads the fleet's due deliveries this many at a time, up to this many pages, until one names a delivery this instance does not hold. */
const SCAN_PAGE = 1000;
const SCAN_PAGES = 10;
/** Redis unreachable at a claim: no attempt without a lease; it is tried again this much later. */
const CLAIM_AGAIN_MS = 1000;
/** Deliveries put back within the schedule in one call to Redis (see DeliveryLeases.retime). */
const RETIME_BATCH = 500;

/** The caller's copy with what the fleet's state says of it (withState), due when the fleet has it due. */
function asTheFleetHasIt(d: DeliveryRecord, state: string): DeliveryRecord {
  const x = withState(d, state);
  return x.next_attempt_at === d.next_attempt_at ? x : rescheduled(x, x.next_attempt_at);
}

/** The attempt count a state from Redis names (-1 when it names none). */
function attemptOf(state: string): number {
  try {
    const a = (JSON.parse(state) as { attempt?: unknown } | null)?.attempt;
    return Number.isSafeInteger(a) ? (a as number) : -1;
  } catch {
    return -1;
  }
}

export interface FleetQueueOptions extends OutcomesOptions {
  rows: DeliveryRows;
  leases: DeliveryLeases;
}

/**
 * A fleet's queue (coordination.redis_url): Redis names what is due and leases each
 * attempt to one instance (fleet/dispatch.ts); storage says what each delivery is.
 * Each instance holds in memory the deliveries it made and those its scan finds due
 * soon (any instance's, a dead one's too), and claims each before attempting it.
 */
export class FleetQueue implements DeliveryQueue {
  private readonly held = new Waiting();
  private readonly outcomes: Outcomes;
  /** Outcomes Redis has not heard of yet (it was unreachable when they were made). */
  private unreleased: DeliveryRecord[] = [];
  /** Deliveries stored and held here that Redis has not heard of yet (it was unreachable when they were made). */
  private unannounced: DeliveryRecord[] = [];
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  /**
   * The longest wait the schedule gives (ms), as the dispatcher names it at each tick
   * (retime): a due time further ahead than that from now was set while a clock ran ahead.
   * Null until the first tick: scans look for none before.
   */
  private longestMs: number | null = null;
  /** How far the fleet's now (the later of Redis's clock and this one's) was ahead of this clock at the last look (ms, ≥ 0). */
  private fleetAhead = 0;
  /** The fleet asked about copies held here that were due too far ahead (see retime), until it answers. */
  private asking: Promise<void> | null = null;

  constructor(private readonly o: FleetQueueOptions) {
    this.outcomes = new Outcomes(o);
  }

  get waiting(): number {
    return this.held.size;
  }

  overdueMs(): number {
    return this.held.overdueMs(this.o.clock.now());
  }

  async add(rows: DeliveryRecord[]): Promise<void> {
    await this.o.rows.put(rows);
    // Stored: from here on they are this instance's to attempt, whether or not Redis hears
    // of them now (a claim puts back in the fleet's queue a delivery Redis does not list).
    for (const d of rows) this.held.push(d);
    try {
      await this.o.leases.add(rows);
    } catch (e) {
      // Redis unreachable: told at the next scan that reaches it, so the fleet lists them
      // even if this instance goes away first (its queue was filled from storage already).
      this.unannounced.push(...rows);
      this.o.log.debug('new webhook deliveries not yet in the fleet queue (Redis unavailable)', { err: e as Error });
    }
  }

  due(now: number, reserve: (d: DeliveryRecord) => boolean): DeliveryRecord[] {
    return this.held.due(now, reserve);
  }

  /**
   * The dispatcher's look at each tick (`longestMs`: the longest wait its schedule gives).
   * A copy held here due after `now + longestMs` (by this clock, or by the fleet's now
   * when that was ahead of it at the last look) was set while a clock ran ahead: it is due
   * here at the time `at` gives it (never sooner than a correct clock would, should a claim
   * put it back in Redis as it is), and the fleet is asked at once to move its own due time
   * (Redis's, which claims go by) within the schedule, for every instance; the copy then
   * waits for the time the fleet has. Nothing is written to storage: in a fleet the due
   * time is Redis's (storage shows the new one once the attempt is made). Costs nothing
   * while no copy held is due that far ahead.
   */
  retime(now: number, longestMs: number, at: (d: DeliveryRecord) => number): number {
    this.longestMs = longestMs;
    const ids: string[] = [];
    const n = this.held.retime(now + longestMs + this.fleetAhead, (d) => {
      ids.push(d.id);
      return rescheduled(d, at(d));
    });
    if (ids.length > 0 && !this.stopped) {
      const before = this.asking ?? Promise.resolve();
      const asking: Promise<void> = before
        .then(async () => {
          await this.retimeFleet(ids);
        })
        .catch((e: Error) =>
          this.o.log.debug('webhook retries not yet moved in the fleet queue (Redis unavailable)', { err: e }),
        )
        .finally(() => {
          if (this.asking === asking) this.asking = null;
        });
      this.asking = asking;
    }
    return n;
  }

  /**
   * Moves within the schedule, in Redis, what is due further ahead than it allows: `ids`
   * (copies held here), or else the first RETIME_BATCH the fleet's queue has that far ahead.
   * The states Redis then has of them (of those moved, without `ids`), by id; the copies
   * held here take the fleet's due time.
   */
  private async retimeFleet(ids: readonly string[] = []): Promise<Map<string, string>> {
    const states = new Map<string, string>();
    const longest = this.longestMs;
    if (longest === null) return states;
    // Without ids, one call; with them, RETIME_BATCH a call.
    const parts: (readonly string[])[] = ids.length === 0 ? [[]] : [];
    for (let i = 0; i < ids.length; i += RETIME_BATCH) parts.push(ids.slice(i, i + RETIME_BATCH));
    for (const part of parts) {
      const now = this.o.clock.now();
      const r = await this.o.leases.retime(now, longest, RETIME_BATCH, part);
      this.fleetAhead = Math.max(0, r.now - now);
      for (const [id, state] of r.states) states.set(id, state);
    }
    if (states.size > 0) {
      // Each copy held of them takes the fleet's state: one pass over those held, only once
      // some were due too far ahead. A copy whose attempt the fleet has not reached yet is an
      // outcome made since: it stays.
      this.held.retime(Number.NEGATIVE_INFINITY, (d) => {
        const state = states.get(d.id);
        return state !== undefined && attemptOf(state) >= d.attempt ? asTheFleetHasIt(d, state) : d;
      });
    }
    return states;
  }

  async claim(d: DeliveryRecord): Promise<DeliveryRecord | null> {
    const now = this.o.clock.now();
    try {
      const c = await this.o.leases.claim(d, now);
      if (c.ok) return c.d;
      this.held.release(d.id);
      // Not due yet in the fleet's state (another instance attempted it): wait for that time.
      if (c.next) this.held.push(c.next);
    } catch {
      this.held.push({ ...d, next_attempt_at: this.o.clock.now() + CLAIM_AGAIN_MS });
    }
    return null;
  }

  async settle(outcome: DeliveryRecord): Promise<void> {
    this.outcomes.record(outcome);
    if (outcome.status === 'failed' && outcome.next_attempt_at !== null) this.held.push(outcome);
    else this.held.release(outcome.id);
    const ok = await this.o.leases.release(outcome).catch(() => null);
    if (ok === null) this.unreleased.push(outcome);
    else if (!ok) this.o.log.warn('webhook delivery lease expired during its attempt', { delivery_id: outcome.id });
  }

  record(outcome: DeliveryRecord): void {
    this.outcomes.record(outcome);
  }

  withdraw(endpointId: string): DeliveryRecord[] {
    const out = this.held.withdraw(endpointId);
    // Ended for the fleet too: storage has them dead-lettered, so no scan would take them
    // in again, and Redis would list them as due for good, ahead of every later delivery
    // in a scan (which reads the most overdue first, a bounded number).
    if (out.length > 0) {
      this.cancel(
        out.map((d) => d.id),
        'deliveries withdrawn for a deleted endpoint stay in the fleet queue',
      );
    }
    return out;
  }

  /** Ends deliveries in the fleet's queue; a failure is said once (the fleet may still name them). */
  private cancel(ids: string[], failure: string): void {
    void this.o.leases
      .cancel(ids)
      .catch((e: Error) => this.o.log.warn(failure, { delivery_id: ids[0] as string, deliveries: ids.length, err: e }));
  }

  end(d: DeliveryRecord): DeliveryRecord | null {
    // Another instance may hold it: it ends there too (at its next claim or release).
    this.cancel([d.id], 'a delivery sent again by hand may be attempted once more');
    return this.held.take(d);
  }

  /** Redis holds the queue: storage fills it when Redis holds none, then every instance takes what is due. */
  resume(): Promise<number> {
    return this.scan();
  }

  /**
   * Takes in the fleet's deliveries due soon that this instance does not hold yet.
   * When Redis holds no queue (the fleet's first start, or Redis restarted empty),
   * fills it from storage first.
   */
  async scan(): Promise<number> {
    if (this.stopped) return 0;
    const { leases, rows } = this.o;
    let n = 0;
    try {
      // The fleet's answer about copies held here, first (see retime).
      if (this.asking) await this.asking;
      for (const d of this.unreleased.splice(0)) {
        if ((await leases.release(d).catch(() => null)) === null) this.unreleased.push(d);
      }
      const unannounced = this.unannounced.splice(0);
      if ((await leases.add(unannounced).catch(() => null)) === null) this.unannounced.push(...unannounced);
      if (await leases.unseeded()) {
        const all = await rows.unfinished();
        await leases.add(all);
        await leases.seeded();
        n += this.takeIn(all);
      }
      // Retries due further ahead than the schedule allows (set while a clock ran ahead, since
      // put right), whichever instance made them: moved within it. One look at the far end of
      // the fleet's due set while none is there.
      const moved = await this.retimeFleet();
      if (moved.size > 0)
        this.o.log.warn(
          'webhook retries due further ahead than the schedule allows in the fleet queue (a clock was put back): moved',
          { deliveries: moved.size },
        );
      // Redis names what is due; what each delivery is (payload, endpoint, attempts allowed) is storage's.
      // Page by page past what this instance holds already (a backlog of its own, due and
      // waiting for its endpoint, must not hide another instance's deliveries from it).
      const until = this.o.clock.now() + SCAN_AHEAD_MS;
      const fresh: string[] = [];
      for (let page = 0; page < SCAN_PAGES && fresh.length === 0; page++) {
        const ids = await leases.due(until, SCAN_PAGE, page * SCAN_PAGE);
        for (const id of ids) if (!this.held.holds(id)) fresh.push(id);
        if (ids.length < SCAN_PAGE) break;
      }
      // Storage has the due time of an attempt's outcome; one just moved is Redis's.
      const found = await rows.unfinishedAmong(fresh);
      n += this.takeIn(
        moved.size === 0
          ? found
          : found.map((d) => (moved.has(d.id) ? asTheFleetHasIt(d, moved.get(d.id) as string) : d)),
      );
    } catch (e) {
      this.o.log.debug('webhook queue scan failed (Redis or storage unavailable)', { err: e as Error });
    }
    return n;
  }

  private takeIn(rows: DeliveryRecord[]): number {
    let n = 0;
    for (const d of rows) {
      if (this.held.holds(d.id)) continue;
      this.held.push(d);
      n++;
    }
    return n;
  }

  start(found: () => void): void {
    this.timer = setInterval(async () => {
      if ((await this.scan()) > 0) found();
    }, SCAN_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  resumeLog(): void {
    this.outcomes.resume();
  }

  flush(): Promise<void> {
    return this.outcomes.flush();
  }
}
