// Regression tests from a review of a host whose resources run out (2026-11-27).
/**
 * Defect: after the process ran out of file descriptors for a moment (a segment could
 * not even be created), `wakegate_spool_bytes` / `/readyz` `spool_bytes` stay above zero
 * for good with no segment spooled (`spool_batches` 0): the log's disk budget
 * (storage.spool_max_bytes) leaks those bytes at every such episode, until new wakes are
 * dropped as `wal_full` although the log directory is empty.
 *
 * DESIGN / docs/durability.md: "/readyz ... with the spool's size; the metrics
 * wakegate_storage_up, wakegate_spool_bytes and wakegate_spool_batches show the same";
 * rows are dropped as wal_full only when the log's disk budget is really spent.
 *
 * Cause: src/capture/wal.ts. seal() records the segment's bytes (350: sizes.set) and
 * counts them in `bytes`; when its file was never created (open failed: EMFILE) and
 * storage failed too, keep() (371-386) cannot write it and the token stays in the
 * backlog; peek() then finds no file and drops the token (393-396: backlog.shift())
 * without subtracting sizes.get(name) from `bytes` (compare setAside, 433, and
 * acknowledge, 362). Fix: subtract (and delete) the size there, and count the rows lost.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { type Child, kill, metric, sleep, spawnLimited, storedIds } from '../helpers/exhaust.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

let root: string;
let origin: TestServer;
let g: Child | null = null;
const admin = `svc_live_${newSecret()}`;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'wg-review-leak-'));
  writeFileSync(
    join(root, 'cfg.yaml'),
    'rate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\nlog:\n  level: info\ncapture:\n  flush_interval_ms: 100\n',
  );
  origin = await startServer((_q, res) => res.end('ok'));
});
afterAll(async () => {
  await kill(g);
  await origin?.close();
  rmSync(root, { recursive: true, force: true });
});

it('shows no spooled bytes once nothing is spooled, after a moment without file descriptors', async () => {
  g = await spawnLimited(
    ['serve', '--config', join(root, 'cfg.yaml')],
    { DATA_DIR: join(root, 'data'), ORIGIN_URL: origin.url, WAKEGATE_ADMIN_KEY: admin },
    { nofile: 256 },
  );
  const gw = g;
  for (let i = 0; i < 5; i++) await (await fetch(`${gw.url}/warm/${i}`)).arrayBuffer();
  await sleep(500);
  const socks: net.Socket[] = [];
  try {
    for (let i = 0; i < 300; i++) {
      const s = net.connect(gw.port, '127.0.0.1');
      s.on('error', () => {});
      socks.push(s);
    }
    await sleep(1000);
    for (let i = 0; i < 5; i++) {
      const r = await fetch(`${gw.url}/nofd/${i}`, { signal: AbortSignal.timeout(5000) }).catch(() => null);
      await r?.arrayBuffer();
    }
    await sleep(1500);
  } finally {
    for (const s of socks) s.destroy();
  }
  await sleep(500);
  // Descriptors are back: new wakes are stored, the backlog is empty.
  for (let i = 0; i < 10; i++) await (await fetch(`${gw.url}/back/${i}`)).arrayBuffer();
  await until(async () => (await storedIds(gw.url, admin, '/back/*')).length === 10, 20_000, 'storage back');
  await sleep(2000);
  const ready = await (await fetch(`${gw.opsUrl}/readyz`)).json();
  const m = await (await fetch(`${gw.opsUrl}/metrics`)).text();
  expect(ready.spool_batches).toBe(0);
  expect(metric(m, 'wakegate_spool_batches')).toBe(0);
  expect({ readyz: ready.spool_bytes, metric: metric(m, 'wakegate_spool_bytes') }).toEqual({ readyz: 0, metric: 0 });
}, 90_000);
