// Regression tests from a review of durability (2026-11-28).
/**
 * A segment whose write failed (the log's disk full) and whose insert failed too is held
 * in memory; a stop while the disk still refuses "lets go" of it with Wal.acknowledge,
 * which deletes the segment's file: the lines the disk had taken before the failure go
 * with it, though docs/durability.md says "a restart finds every row the disk took; a
 * stop or a kill while the disk still refuses loses those held in memory".
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { CAN_MOUNT, fill, mountTmpfs, unmount } from '../helpers/exhaust.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a stop while the log disk is full and storage is down', () => {
  let origin: TestServer;
  let root: string;
  let t: TestGateway | null = null;
  const admin = `svc_live_${newSecret()}`;
  const data = () => join(root, 'data');
  const walMount = () => join(data(), 'wal');

  beforeAll(async () => {
    origin = await startServer((_q, res) => res.end('ok'));
    root = mkdtempSync(join(tmpdir(), 'wg-stopfull-'));
    mkdirSync(data(), { recursive: true });
  });
  afterAll(async () => {
    await t?.stop();
    await origin.close();
    unmount(walMount());
    rmSync(root, { recursive: true, force: true });
  });

  it.skipIf(!CAN_MOUNT)(
    'keeps on disk the lines the disk took before it filled',
    async () => {
      // Only the write-ahead log's folder is small (the embedded engine's disk is not full).
      mountTmpfs(walMount(), '4m');
      const values = {
        capture: { flush_interval_ms: 1000, batch_rows: 100000 },
        routes: [{ name: 'api', prefix: '/', auth: 'none', origins: { production: origin.url } }],
      };
      let down = true;
      t = await startGateway(values, {
        dir: data(),
        admin,
        spoolRetryMs: 100,
        wakeSink: (real) => (rows, token, file) =>
          down ? Promise.reject(new Error('storage down (injected)')) : real(rows, token, file),
      });
      // Taken by the disk: written to the log within 10 ms.
      const taken: string[] = [];
      for (let i = 0; i < 5; i++) {
        const r = await fetch(`${t.url}/taken/${i}`);
        await r.arrayBuffer();
        taken.push(r.headers.get('x-wake-id') as string);
      }
      await sleep(100);
      fill(join(walMount(), 'filler'));
      // Refused by the disk: held in memory.
      for (let i = 0; i < 5; i++) await (await fetch(`${t.url}/refused/${i}`)).arrayBuffer();
      await sleep(1500); // the batch is sealed, its insert fails, it is held
      const segs = () => readdirSync(join(walMount(), 'wakes')).filter((f) => f.endsWith('.wal'));
      const before = segs().map((f) => readFileSync(join(walMount(), 'wakes', f), 'utf8'));
      // Before the stop the lines the disk took are in a segment on disk.
      expect(
        before
          .join('')
          .split('\n')
          .filter((l) => taken.some((id) => l.startsWith(`${id}\t`))),
      ).toHaveLength(5);
      await t.stop();
      t = null;
      // After it, that file is gone.
      expect(segs(), 'segments on disk after the stop').not.toEqual([]);
      // The disk has room again; storage answers.
      rmSync(join(walMount(), 'filler'));
      down = false;
      t = await startGateway(values, { dir: data(), admin, spoolRetryMs: 100 });
      await sleep(2000);
      let stored = 0;
      for (const id of taken) {
        const r = await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(admin) });
        await r.arrayBuffer();
        if (r.status === 200) stored++;
      }
      expect(stored).toBe(taken.length);
    },
    60_000,
  );
});
