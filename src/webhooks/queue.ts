import type { DeliveryTable } from '../store/webhooks.js';
import type { DeliveryRecord } from './records.js';

/** What a queue reads and writes of stored deliveries (a test hands in an array). */
export type DeliveryRows = Pick<DeliveryTable, 'put' | 'unfinished' | 'unfinishedAmong'>;

/**
 * Where the dispatcher's deliveries wait, apart from how they are sent (as
 * graphile-worker's worker is handed getJob/completeJob/failJob). One instance
 * alone holds its queue in memory (LocalQueue); a fleet shares it in Redis, under
 * a lease per attempt (FleetQueue). Either way, storage holds what each delivery
 * is, and every outcome is written there (through the write-ahead log).
 *
 * A delivery taken by `due` is this queue's until `settle` (or `claim` declines it):
 * the dispatcher attempts it once, then hands back the outcome.
 */
export interface DeliveryQueue {
  /** Deliveries waiting here for an attempt (not those taken for one). */
  readonly waiting: number;
  /** How long ago (ms) the most overdue waiting delivery fell due; 0 when none is due. */
  overdueMs(): number;
  /** Persists new deliveries, then schedules them. */
  add(rows: DeliveryRecord[]): Promise<void>;
  /**
   * Takes the deliveries due by `now`, endpoints taking turns (the first one
   * rotates, so a busy endpoint cannot starve the others). `reserve` is asked
   * before each is taken and counts it: false when its endpoint (or its environment)
   * is at its cap, and that endpoint's turn ends.
   */
  due(now: number, reserve: (d: DeliveryRecord) => boolean): DeliveryRecord[];
  /**
   * Moves each waiting delivery due after `now + longestMs` (`longestMs`: the longest wait
   * the schedule gives; a due time past it no correct clock could have set: the clock was
   * put back since) to the time `at` gives it, and writes it so (a single instance to
   * storage; a fleet to Redis, which holds its due times); how many.
   */
  retime?(now: number, longestMs: number, at: (d: DeliveryRecord) => number): number;
  /**
   * The delivery as it is to be attempted now (a fleet leases it and numbers it as
   * the fleet has it), or null when it is not to be attempted now: it waits again
   * for its time, or another instance has it.
   */
  claim(d: DeliveryRecord): Promise<DeliveryRecord | null>;
  /** A claimed attempt's outcome: written, scheduled again when it is to be retried, its lease ended. */
  settle(outcome: DeliveryRecord): Promise<void>;
  /** Writes the outcome of a delivery ended without an attempt (withdrawn or superseded). */
  record(outcome: DeliveryRecord): void;
  /** Takes out every delivery waiting for this endpoint (it was deleted). */
  withdraw(endpointId: string): DeliveryRecord[];
  /**
   * Ends a delivery's own retries (it was sent again by hand): in a fleet for every
   * instance. Returns its waiting copy, taken out, when it waited here.
   */
  end(d: DeliveryRecord): DeliveryRecord | null;
  /** Loads the unfinished deliveries (after a restart); how many were taken in. */
  resume(): Promise<number>;
  /** Starts inserting the outcomes the write-ahead log holds from an earlier run. */
  resumeLog(): void;
  /** Starts looking for deliveries other instances made; `found` is told when some were taken in. */
  start(found: () => void): void;
  /** Stops looking; what is waiting stays (it is in storage). */
  stop(): void;
  /** Writes every recorded outcome (or spools it while storage fails). */
  flush(): Promise<void>;
}
