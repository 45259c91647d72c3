// Regression tests from a review of rate limits and buckets (2026-11-27).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BUCKETS_FILE } from '../../src/ratelimit/persist.js';
import { startGateway } from '../helpers/gateway.js';

/**
 * docs/keys-and-limits.md: "A damaged file is logged and ignored." The gateway reads
 * DATA_DIR/ratelimit-buckets.bin with a plain readFileSync (src/ratelimit/persist.ts),
 * following whatever the path is: a FIFO (or a symlink to one, or to /dev/zero) blocks
 * the start for as long as nobody writes to it (here a helper writes after 4 s, so the
 * test is bounded), where TLS material is read through readBounded (O_NONBLOCK, regular
 * files only, a size bound) for exactly this reason.
 */
describe('review: a buckets file that is no regular file does not hold up the start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-fifo-'));
  let writer: ChildProcess | null = null;
  afterAll(() => {
    writer?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('a FIFO in place of the file: the start is prompt (logged and ignored)', async () => {
    const fifo = join(dir, BUCKETS_FILE);
    execFileSync('mkfifo', ['-m', '600', fifo]);
    // Unblocks a reader stuck on the FIFO after 20 s, so the defect costs 20 s, not forever
    // (the gateway starts in this process: a read blocked on the FIFO blocks the test too).
    writer = spawn('sh', ['-c', `sleep 20; printf garbage > '${fifo}'`], { stdio: 'ignore' });
    const t0 = Date.now();
    const t = await startGateway({}, { dir });
    const ms = Date.now() - t0;
    try {
      const r = await fetch(`${t.url}/anything`);
      await r.arrayBuffer();
      // It was 20 s: the start blocked in readFileSync until the writer wrote (a start takes
      // about 2 s, and well under 15 on a loaded host).
      expect(ms).toBeLessThan(15_000);
    } finally {
      await t.stop();
    }
  }, 60_000);
});
