// Regression tests from a review of a host whose resources run out (2026-11-27).
/**
 * Defect: once the disk has room again and storage takes every insert, /readyz keeps
 * answering `"status":"degraded","storage":"down"` (with a spool batch that no longer
 * exists) for as long as no new event is raised: on a healthy gateway that may be hours.
 *
 * DESIGN (readiness, durability.md): /readyz says degraded/storage down *during* an
 * outage, and `/readyz` and `/metrics` are to be honest; after it, "ready".
 *
 * Cause: src/capture/batcher.ts: `stats.storageUp`, set false when an insert fails
 * (batcher.ts:302), turns true again only on a successful insert (296-297). The event
 * bus (src/events/bus.ts, the same Batcher) has nothing more to insert once its failed
 * segment is gone from the backlog (its rows lost, see disk-full-wakes-lost.test.ts;
 * replayBacklog at 331-337 skips it without a write), and it inserts again only when an
 * event is raised; so src/readiness.ts:25 (`!bus.stats.storageUp`) keeps answering
 * storage down, although readiness() itself just read from storage (migrationsApplied,
 * readiness.ts:21) and the wakes' inserts succeed. (A related staleness: Batcher.drain
 * returns at 220-221 without refreshLogStats() when the replay emptied the backlog, so
 * `spool_batches` can stay at its last count.) Fix: a backlog emptied, or a successful
 * read of storage, should set storageUp again (or the bus's retry should probe storage).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import {
  CAN_MOUNT,
  type Child,
  fill,
  kill,
  mountTmpfs,
  sleep,
  spawnLimited,
  storedIds,
  unmount,
} from '../helpers/exhaust.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

let root: string;
let origin: TestServer;
let g: Child | null = null;
const admin = `svc_live_${newSecret()}`;
const mnt = () => join(root, 'mnt');

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'wg-review-ready-'));
  writeFileSync(
    join(root, 'cfg.yaml'),
    'rate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\nlog:\n  level: info\ncapture:\n  flush_interval_ms: 100\n',
  );
  origin = await startServer((req, res) => {
    if (req.url?.startsWith('/boom')) res.writeHead(500);
    res.end('ok');
  });
});
afterAll(async () => {
  await kill(g);
  await origin?.close();
  unmount(mnt());
  rmSync(root, { recursive: true, force: true });
});

it.skipIf(!CAN_MOUNT)(
  'says ready (storage up, nothing spooled) once the disk has room again and inserts succeed',
  async () => {
    mountTmpfs(mnt(), '96m');
    g = await spawnLimited(['serve', '--config', join(root, 'cfg.yaml')], {
      DATA_DIR: join(mnt(), 'data'),
      ORIGIN_URL: origin.url,
      WAKEGATE_ADMIN_KEY: admin,
    });
    for (let i = 0; i < 5; i++) await (await fetch(`${g.url}/warm/${i}`)).arrayBuffer();
    await sleep(500);
    fill(join(mnt(), 'filler'));
    // Traffic while the disk is full, with an origin error among it (a wake.error event).
    for (let i = 0; i < 30; i++) await (await fetch(`${g.url}/full/${i}`)).arrayBuffer();
    await (await fetch(`${g.url}/boom`)).arrayBuffer();
    await sleep(1500);
    const during = await (await fetch(`${g.opsUrl}/readyz`)).json();
    expect(during).toMatchObject({ status: 'degraded', storage: 'down' });
    rmSync(join(mnt(), 'filler'));
    // Storage takes every insert again: new wakes are stored.
    for (let i = 0; i < 10; i++) await (await fetch(`${g.url}/back/${i}`)).arrayBuffer();
    const gw = g;
    await until(async () => (await storedIds(gw.url, admin, '/back/*')).length === 10, 20_000, 'storage back');
    // Well past the spool's retry interval (1 s).
    let last: Record<string, unknown> = {};
    try {
      await until(
        async () => {
          last = await (await fetch(`${gw.opsUrl}/readyz`)).json();
          return last.status === 'ready';
        },
        10_000,
        'ready',
      );
    } catch {
      // Shown below.
    }
    expect(last).toMatchObject({ status: 'ready', storage: 'up', spool_batches: 0, events_spool_batches: 0 });
  },
  90_000,
);
