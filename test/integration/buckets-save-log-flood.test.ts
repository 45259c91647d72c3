// Regression tests from a review of a host whose resources run out (2026-11-27).
/**
 * Defect: while the data directory's disk is full, the rate-limit buckets saver logs
 * "rate-limit buckets not saved" every 5 s for as long as the disk stays full and
 * requests arrive (720 lines an hour), instead of once when saving starts failing (and
 * once when it works again).
 *
 * DESIGN: an outage is logged once (Redis: "the outage is logged once"); buckets are
 * written "every few seconds" (Rate limits), so a failing disk must not turn that into a
 * log line every few seconds.
 *
 * Cause: bucketsSaver (src/ratelimit/persist.ts:177-185) warns on every failed write;
 * since `written` is reset to null before each attempt (176), the next tick (every
 * SAVE_EVERY_MS = 5 s, 191) tries and warns again. Fix: remember the failing state and
 * log on the transitions only (a metric can count failed saves).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { CAN_MOUNT, type Child, fill, kill, mountTmpfs, spawnLimited, unmount } from '../helpers/exhaust.js';
import { startServer, type TestServer } from '../helpers/origin.js';

let root: string;
let origin: TestServer;
let g: Child | null = null;
const admin = `svc_live_${newSecret()}`;
const mnt = () => join(root, 'mnt');

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'wg-review-buckets-'));
  writeFileSync(
    join(root, 'cfg.yaml'),
    'rate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\nlog:\n  level: info\n',
  );
  origin = await startServer((_q, res) => res.end('ok'));
});
afterAll(async () => {
  await kill(g);
  await origin?.close();
  unmount(mnt());
  rmSync(root, { recursive: true, force: true });
});

it.skipIf(!CAN_MOUNT)(
  'logs a failing buckets save once while the disk stays full, not every 5 s',
  async () => {
    mountTmpfs(mnt(), '96m');
    g = await spawnLimited(['serve', '--config', join(root, 'cfg.yaml')], {
      DATA_DIR: join(mnt(), 'data'),
      ORIGIN_URL: origin.url,
      WAKEGATE_ADMIN_KEY: admin,
    });
    await (await fetch(`${g.url}/warm`)).arrayBuffer();
    fill(join(mnt(), 'filler'));
    const from = g.stderr().length;
    // 16 s of light traffic (each request spends from its address's bucket) on a full disk.
    const end = Date.now() + 16_000;
    while (Date.now() < end) {
      await (await fetch(`${g.url}/t`)).arrayBuffer();
      await new Promise((r) => setTimeout(r, 200));
    }
    const lines = g
      .stderr()
      .slice(from)
      .split('\n')
      .filter((l) => l.includes('rate-limit buckets not saved'));
    expect(lines.length, `${lines.length} lines, the first: ${lines[0]}`).toBeLessThanOrEqual(1);
  },
  60_000,
);
