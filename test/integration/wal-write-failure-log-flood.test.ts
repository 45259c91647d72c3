// Regression tests from a review of a host whose resources run out (2026-11-27).
/**
 * Defect: while the write-ahead log's disk stays full (storage itself fine), the gateway
 * logs two error lines for every batch (every flush_interval_ms, 2 a second per stream at
 * the default 500 ms, more under load), for as long as it lasts: a flood, not one line
 * per outage.
 *
 * DESIGN: outages are "logged once" (Redis: "the outage is logged once"; storage:
 * batcher.ts logs an insert failure only on the transition, 300-301). An operator whose
 * disk is full gets one line that says so, and one when it is over.
 *
 * Cause: Wal.writePending (src/capture/wal.ts:274-278) logs "write-ahead log write failed"
 * at every segment's first failed write (activeBroken is reset at every seal, wal.ts:328),
 * and Batcher.drain (src/capture/batcher.ts:234-236) logs "the write-ahead log could not
 * write this batch whole" for every such batch. Fix: keep a "log disk failing" state in
 * Wal, log on the transition (and once when writes succeed again), count the rest in a
 * metric.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { CAN_MOUNT, type Child, fill, kill, mountTmpfs, sleep, spawnLimited, unmount } from '../helpers/exhaust.js';
import { startServer, type TestServer } from '../helpers/origin.js';

let root: string;
let origin: TestServer;
let g: Child | null = null;
const admin = `svc_live_${newSecret()}`;
const walDir = () => join(root, 'data', 'wal');

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'wg-review-flood-'));
  writeFileSync(
    join(root, 'cfg.yaml'),
    'rate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\nlog:\n  level: info\ncapture:\n  flush_interval_ms: 100\n',
  );
  origin = await startServer((_q, res) => res.end('ok'));
});
afterAll(async () => {
  await kill(g);
  await origin?.close();
  unmount(walDir());
  rmSync(root, { recursive: true, force: true });
});

it.skipIf(!CAN_MOUNT)(
  'logs a full write-ahead-log disk once (or a few times), not once per batch',
  async () => {
    mkdirSync(join(root, 'data'), { recursive: true });
    // Only the log's directory is on the tiny disk: storage (DATA_DIR/clickhouse) has room.
    mountTmpfs(walDir(), '1m');
    g = await spawnLimited(['serve', '--config', join(root, 'cfg.yaml')], {
      DATA_DIR: join(root, 'data'),
      ORIGIN_URL: origin.url,
      WAKEGATE_ADMIN_KEY: admin,
    });
    await (await fetch(`${g.url}/warm`)).arrayBuffer();
    fill(join(walDir(), 'filler'));
    const from = g.stderr().length;
    // Three seconds of steady traffic on a full log disk.
    const end = Date.now() + 3000;
    let sent = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (Date.now() < end) {
          await (await fetch(`${(g as Child).url}/full/${sent++}`)).arrayBuffer();
        }
      }),
    );
    await sleep(500);
    const lines = g
      .stderr()
      .slice(from)
      .split('\n')
      .filter((l) => l.includes('"level":"error"') || l.includes('"level":"warn"'));
    const wal = lines.filter((l) => /write-ahead log/.test(l));
    console.log(
      `${sent} requests in 3 s on a full log disk: ${lines.length} error/warn lines, ${wal.length} about the log`,
    );
    expect(sent).toBeGreaterThan(50);
    expect(
      wal.length,
      `${wal.length} lines about the log: ${wal.map((l) => l.slice(0, 160)).join('\n')}`,
    ).toBeLessThanOrEqual(4);
  },
  60_000,
);
