import { Batcher } from '../capture/batcher.js';
import type { Wal } from '../capture/wal.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { DeliveryRows } from './queue.js';
import type { DeliveryRecord } from './records.js';

export interface OutcomesOptions {
  rows: Pick<DeliveryRows, 'put'>;
  /** The deliveries' write-ahead log; null: outcomes wait in memory only. */
  spool: Wal<DeliveryRecord> | null;
  clock: Clock;
  log: Logger;
}

/** Outcomes are written in batches, and spooled to disk while storage fails, like wakes. */
export class Outcomes {
  private readonly batcher: Batcher<DeliveryRecord>;
  private readonly clock: Clock;

  constructor(o: OutcomesOptions) {
    this.clock = o.clock;
    this.batcher = new Batcher<DeliveryRecord>(
      { batchRows: 1000, flushIntervalMs: 50, maxBufferedRows: 1_000_000 },
      (rows) => o.rows.put(rows),
      o.spool,
      o.log,
    );
  }

  /** Stamps the outcome later than the row it replaces (the table keeps the latest), and writes it. */
  record(d: DeliveryRecord): void {
    d.updated_at = Math.max(this.clock.now(), d.updated_at + 1);
    this.batcher.push(d);
  }

  /** Starts inserting what the log holds from an earlier run. */
  resume(): void {
    this.batcher.resume();
  }

  flush(): Promise<void> {
    return this.batcher.flush();
  }
}
