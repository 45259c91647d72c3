import { Outcomes, type OutcomesOptions } from '../webhooks/outcomes.js';
import type { DeliveryQueue, DeliveryRows } from '../webhooks/queue.js';
import type { DeliveryRecord } from '../webhooks/records.js';
import { Waiting } from '../webhooks/waiting.js';
import type { DeliveryLeases } from './dispatch.js';

/** A fleet's instances look for deliveries to take over this often, this far ahead. */
const SCAN_EVERY_MS = 2000;
const SCAN_AHEAD_MS = 5000;
/** A scan reads the fleet's due deliveries this many at a time, up to this many pages, until one names a delivery this instance does not hold. */
const SCAN_PAGE = 1000;
const SCAN_PAGES = 10;
/** Redis unreachable at a claim: no attempt without a lease; it is tried again this much later. */
const CLAIM_AGAIN_MS = 1000;

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

  due(now: number, reserve: (endpointId: string) => boolean): DeliveryRecord[] {
    return this.held.due(now, reserve);
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
      n += this.takeIn(await rows.unfinishedAmong(fresh));
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
