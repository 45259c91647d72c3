// Regression tests from a review of a host whose resources run out (2026-11-27).
/**
 * Defect: a write-ahead log directory deleted while the gateway runs is never made
 * again: every later segment fails to open (ENOENT), wakes wait in memory until their
 * batch is inserted, and a kill meanwhile loses every wake answered in the last
 * flush_interval_ms (500 ms by default), not the 10 ms the design promises. Nothing
 * recovers by itself; /readyz says ready throughout.
 *
 * DESIGN (Capture and durability): "every wake ... is appended to a write-ahead log in
 * DATA_DIR within wal.sync_interval_ms (10 ms) of its response ending ... A killed
 * process (SIGKILL, OOM) loses at most the last 10 ms of wakes".
 *
 * Cause: the directory is made only once, in the Wal constructor (src/capture/wal.ts:157,
 * privateDir(dir)); Wal.open (wal.ts:250-258) opens `<dir>/<segment>` with no attempt to
 * make the directory again, and writePending (270-278) then keeps the segment's lines in
 * memory only (`unwritten`). Fix: on ENOENT in open(), privateDir(this.dir) and retry
 * once (and syncDir the parent); say so in one line.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { type Child, kill, sleep, spawnLimited, storedIds } from '../helpers/exhaust.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

let root: string;
let origin: TestServer;
let g: Child | null = null;
const admin = `svc_live_${newSecret()}`;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'wg-review-waldir-'));
  // The defaults of capture (flush_interval_ms 500) and of the log (sync 10 ms).
  writeFileSync(
    join(root, 'cfg.yaml'),
    'rate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\nlog:\n  level: info\n',
  );
  origin = await startServer((_q, res) => res.end('ok'));
});
afterAll(async () => {
  await kill(g);
  await origin?.close();
  rmSync(root, { recursive: true, force: true });
});

it('after its log directory is deleted, a kill still loses only the last 10 ms of wakes', async () => {
  const env = { DATA_DIR: join(root, 'data'), ORIGIN_URL: origin.url, WAKEGATE_ADMIN_KEY: admin };
  const args = ['serve', '--config', join(root, 'cfg.yaml')];
  g = await spawnLimited(args, env);
  await (await fetch(`${g.url}/warm`)).arrayBuffer();
  await sleep(1000);
  // Someone (a cleanup job, an operator) removes the log's directory while the gateway runs.
  const wakesLog = join(root, 'data', 'wal', 'wakes');
  expect(existsSync(wakesLog)).toBe(true);
  rmSync(wakesLog, { recursive: true, force: true });
  await sleep(200);
  // A few batches' worth of wakes, then more, answered well before the kill.
  for (let i = 0; i < 20; i++) await (await fetch(`${g.url}/gone/${i}`)).arrayBuffer();
  await sleep(2000);
  const answered: string[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await fetch(`${g.url}/late/${i}`);
    await r.arrayBuffer();
    answered.push(r.headers.get('x-wake-id') as string);
  }
  // 60 ms: six group commits, far less than one flush interval.
  await sleep(60);
  g.proc.kill('SIGKILL');
  await g.exited;
  g = await spawnLimited(args, env);
  const gw = g;
  let stored: string[] = [];
  try {
    await until(
      async () => {
        stored = await storedIds(gw.url, admin, '/late/*');
        return stored.length >= answered.length;
      },
      10_000,
      'every wake answered 60 ms before the kill',
    );
  } catch {
    // Shown below.
  }
  const have = new Set(stored);
  const lost = answered.filter((id) => !have.has(id));
  expect(lost.length, `${lost.length} of ${answered.length} wakes answered 60 ms before the kill were lost`).toBe(0);
}, 90_000);
