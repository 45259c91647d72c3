import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/index.js';
import type { Logger } from '../log.js';
import { Batcher, type RowListener, type Sink } from './batcher.js';
import { openLog, retentionOf } from './pipeline.js';
import type { Wake } from './wake.js';
import { LOG_SEGMENT_TAG, wakeLogCodec } from './wake-log.js';

/** How often the logs still being stored are looked at, to close those done. */
const CHECK_MS = 1000;

/**
 * The logs of edge threads that this start will not run (fewer threads than the
 * last run): their wakes are stored, each once, and heard by the event rules. They
 * are stored beside serving, retried while storage does not take them (as the
 * running logs are), and each is closed once empty; a stop closes the rest, which
 * keep what storage did not take for the next start.
 */
export function storeOrphanLogs(
  cfg: Readonly<Config>,
  log: Logger,
  threads: number,
  sink: Sink<Wake>,
  rules: readonly RowListener<Wake>[],
  retryMs = 1000,
): { name: string; close: () => Promise<void> } {
  const running = new Set<Batcher<Wake>>();
  let names: string[] = [];
  try {
    names = readdirSync(join(cfg.storage.data_dir, 'wal'));
  } catch {
    // No log folder: nothing left by anyone.
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
        retryIntervalMs: retryMs,
        rowsInLog: true,
      },
      sink,
      wal,
      log,
    );
    for (const r of rules) b.onRows(r);
    b.resume();
    running.add(b);
  }
  const closing = new Set<Promise<void>>();
  const close = (b: Batcher<Wake>): void => {
    running.delete(b);
    const p = b
      .stop()
      .catch((e: Error) => log.error('capture: a log of an earlier edge thread did not close', { err: e }));
    closing.add(p);
    void p.finally(() => closing.delete(p));
  };
  const timer = setInterval(() => {
    for (const b of running) if (b.stats.spoolBatches === 0 && b.buffered === 0) close(b);
    if (running.size === 0) clearInterval(timer);
  }, CHECK_MS);
  timer.unref();
  return {
    name: 'orphan logs',
    close: async () => {
      clearInterval(timer);
      // What storage does not take now stays in the log for the next start.
      for (const b of [...running]) close(b);
      await Promise.all([...closing]);
    },
  };
}
