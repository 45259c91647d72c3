import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Sink } from '../../src/capture/batcher.js';
import type { Wake } from '../../src/capture/wake.js';
import { LOG_SEGMENT_TAG, wakeLogCodec } from '../../src/capture/wake-log.js';
import { newWakeId } from '../../src/ids.js';
import { flushed, startGateway } from '../helpers/gateway.js';
import { until } from '../helpers/receiver.js';
import { wakeRow } from '../helpers/wakes.js';

/**
 * The log of an edge thread this start does not run (fewer threads than the last run)
 * was tried once, before the gateway served: storage down at that moment, its wakes
 * waited for the next start, however long this one ran (and a hung insert held the
 * start up for its timeout). It is now stored beside serving, retried until storage
 * takes it. From a review of durability; the test failed first.
 */
describe('the log of an edge thread this start does not run', () => {
  it('is stored once storage answers, without a restart, and the gateway serves meanwhile', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-orphan-'));
    const wal = join(dir, 'wal', 'wakes-2');
    mkdirSync(wal, { recursive: true, mode: 0o700 });
    const codec = wakeLogCodec(() => 30);
    const at = Date.now() - 60_000;
    const lines = [0, 1, 2].map((i) =>
      codec.encode(wakeRow({ id: newWakeId(at + i), captured_at: at + i, path: `/orphan/${i}` })),
    );
    writeFileSync(
      join(wal, `${String(at).padStart(14, '0')}-review-0.${LOG_SEGMENT_TAG}.wal`),
      lines.map((l) => `${l}\n`).join(''),
      {
        mode: 0o600,
      },
    );
    let down = true;
    const wakeSink =
      (real: Sink<Wake>): Sink<Wake> =>
      (rows, token, file) =>
        down ? Promise.reject(new Error('storage unreachable (injected)')) : real(rows, token, file);
    const t = await startGateway(
      { routes: [{ name: 'o', prefix: '/', auth: 'none', origins: { production: 'http://127.0.0.1:9' } }] },
      { dir, wakeSink, spoolRetryMs: 100 },
    );
    try {
      await new Promise((r) => setTimeout(r, 300));
      const stored = async () =>
        (await t.gw.wakes.list({ environment: 'production', pathPattern: '^/orphan/' }, 10, null)).rows.length;
      expect(await stored()).toBe(0);
      down = false;
      await until(async () => (await stored()) === 3, 10_000, 'the orphan log stored');
      await flushed(t.gw);
      // Its folder holds no segment once stored.
      await until(async () => readdirSync(wal).filter((f) => f.endsWith('.wal')).length === 0, 5000, 'segment removed');
    } finally {
      await t.cleanup();
    }
  }, 40_000);
});
