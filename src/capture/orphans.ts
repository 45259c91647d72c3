import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/index.js';
import type { Logger } from '../log.js';
import { Batcher, type RowListener, type Sink } from './batcher.js';
import { openLog, retentionOf } from './pipeline.js';
import type { Wake } from './wake.js';
import { LOG_SEGMENT_TAG, wakeLogCodec } from './wake-log.js';

/**
 * The logs of edge threads that this start will not run (fewer threads than the
 * last run): their wakes are stored now, each once, and heard by the event rules.
 */
export async function storeOrphanLogs(
  cfg: Readonly<Config>,
  log: Logger,
  threads: number,
  sink: Sink<Wake>,
  rules: readonly RowListener<Wake>[],
): Promise<void> {
  let names: string[];
  try {
    names = readdirSync(join(cfg.storage.data_dir, 'wal'));
  } catch {
    return;
  }
  const kept = threads === 1 ? 0 : threads;
  for (const name of names) {
    const m = /^wakes-(\d+)$/.exec(name);
    if (!m || Number(m[1]) <= kept) continue;
    const wal = openLog<Wake>(cfg, log, name, wakeLogCodec(retentionOf(cfg)), LOG_SEGMENT_TAG);
    if (wal.length === 0) {
      wal.close();
      continue;
    }
    const b = new Batcher<Wake>(
      {
        batchRows: cfg.capture.batch_rows,
        flushIntervalMs: cfg.capture.flush_interval_ms,
        maxBufferedRows: 1,
        rowsInLog: true,
      },
      sink,
      wal,
      log,
    );
    for (const r of rules) b.onRows(r);
    // What storage does not take stays in the log for the next start.
    await b.stop();
  }
}
