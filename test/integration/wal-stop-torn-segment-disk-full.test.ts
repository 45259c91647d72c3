// Regression tests from a review of durability (2026-11-28).
/**
 * A segment left by a kill with a torn last line must be rewritten (Wal.peek's
 * replaceFile) before it is inserted. While the log's disk is full that rewrite throws,
 * so Batcher.drain throws before it seals anything; Batcher.flush's loop
 * (`do { kick(); await settle(); } while (waiting() > 0)`) then runs drain again and
 * again in microtasks: a SIGTERM never ends the process (docs/operations.md: a stop
 * flushes and exits 0; docs/durability.md: a full disk keeps rows in memory, a stop
 * says how many it loses).
 */
import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { CAN_MOUNT, fill, mountTmpfs, unmount } from '../helpers/exhaust.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a stop while a torn segment waits and the log disk is full', () => {
  let origin: TestServer;
  let root: string;
  let g: ChildGateway | null = null;
  const admin = `svc_live_${newSecret()}`;
  const data = () => join(root, 'data');
  const walMount = () => join(data(), 'wal');

  beforeAll(async () => {
    origin = await startServer((_q, res) => res.end('ok'));
    root = mkdtempSync(join(tmpdir(), 'wg-spin-'));
    mkdirSync(data(), { recursive: true });
    writeFileSync(
      join(root, 'cfg.yaml'),
      'server:\n  threads: 1\ncapture:\n  flush_interval_ms: 200\n  batch_rows: 100000\nrate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\n',
    );
  });
  afterAll(async () => {
    if (g && g.proc.exitCode === null && g.proc.signalCode === null) {
      g.proc.kill('SIGKILL');
      await g.exited;
    }
    await origin.close();
    unmount(walMount());
    rmSync(root, { recursive: true, force: true });
  });

  it.skipIf(!CAN_MOUNT)(
    'ends on SIGTERM',
    async () => {
      mountTmpfs(walMount(), '4m');
      const env = { DATA_DIR: data(), ORIGIN_URL: origin.url, WAKEGATE_ADMIN_KEY: admin };
      const args = ['serve', '--config', join(root, 'cfg.yaml')];
      // A segment as a kill mid-write leaves it: whole lines, then a torn one.
      const cfgSlow = join(root, 'slow.yaml');
      writeFileSync(
        cfgSlow,
        'server:\n  threads: 1\ncapture:\n  flush_interval_ms: 600000\n  batch_rows: 100000\nrate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\n',
      );
      g = await spawnGateway(['serve', '--config', cfgSlow], env);
      for (let i = 0; i < 3; i++) await (await fetch(`${g.url}/before/${i}`)).arrayBuffer();
      await sleep(300);
      g.proc.kill('SIGKILL');
      await g.exited;
      const walDir = join(walMount(), 'wakes');
      const [seg] = readdirSync(walDir).filter((f) => f.endsWith('.wal'));
      expect(seg).toBeTruthy();
      appendFileSync(join(walDir, seg as string), 'wk_torn\tproduction\t2026-11-');
      // The log's disk fills up.
      fill(join(walMount(), 'filler'));

      g = await spawnGateway(args, env);
      for (let i = 0; i < 3; i++) await (await fetch(`${g.url}/after/${i}`)).arrayBuffer();
      await sleep(500);
      g.proc.kill('SIGTERM');
      const ended = await Promise.race([g.exited.then(() => true), sleep(10_000).then(() => false)]);
      const retries = g.stderr().split('capture: a batch could not be written; retrying').length - 1;
      g.proc.kill('SIGKILL');
      expect(
        ended,
        `not ended 10 s after SIGTERM; "a batch could not be written; retrying" logged ${retries} times`,
      ).toBe(true);
    },
    60_000,
  );
});
