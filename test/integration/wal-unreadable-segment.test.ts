import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOG_SEGMENT_TAG } from '../../src/capture/wake-log.js';
import { newSecret } from '../../src/ids.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

/**
 * A segment of the wake log that cannot be read (here a directory named like one;
 * EIO on a bad sector, or EACCES on a file another user wrote, fail the same read) took
 * the gateway down on every start: the read threw inside the batcher's drain, whose
 * rejection nobody handled. It is now set aside, named, and capture goes on. From a
 * review of durability; the test failed first.
 */
describe('an unreadable segment in the wake log', () => {
  let origin: TestServer;
  let dir: string;
  const admin = `svc_live_${newSecret()}`;
  const auth = { authorization: `Bearer ${admin}` };

  beforeAll(async () => {
    origin = await startServer((_req, res) => res.end('ok'));
    dir = mkdtempSync(join(tmpdir(), 'wakegate-wal-unreadable-'));
  });
  afterAll(async () => {
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const paths = async (g: ChildGateway, prefix: string): Promise<string[]> => {
    const r = await fetch(`${g.url}/v2/wakes?path=${prefix}*&limit=100`, { headers: auth });
    const page = (await r.json()) as { data: { path: string }[] };
    return page.data.map((w) => w.path).sort();
  };
  /** A segment's name as the log makes them (`<ms>-<prefix>-<seq>.l.wal`). */
  const segName = (ms: number, seq: number) => `${String(ms).padStart(14, '0')}-review-${seq}.${LOG_SEGMENT_TAG}.wal`;

  it('is set aside, and the gateway starts and stores new wakes', async () => {
    const wal = join(dir, 'data', 'wal', 'wakes');
    const bad = segName(Date.now() - 60_000, 0);
    mkdirSync(join(wal, bad), { recursive: true, mode: 0o700 });
    // A file beside it that only looks like a segment by its start: left alone.
    writeFileSync(join(wal, 'notes.txt'), 'not a segment');
    const g = await spawnGateway(['serve'], {
      DATA_DIR: join(dir, 'data'),
      ORIGIN_URL: origin.url,
      WAKEGATE_ADMIN_KEY: admin,
    });
    try {
      expect((await fetch(`${g.url}/after/1`)).status).toBe(200);
      await until(async () => (await paths(g, '/after/')).length === 1, 10_000, 'a new wake stored');
      expect(g.stderr()).toContain('is not a file');
      expect(g.proc.exitCode).toBe(null);
      // Nothing is deleted: the entry is where it was, the other file too.
      expect(statSync(join(wal, bad)).isDirectory()).toBe(true);
      expect(existsSync(join(wal, 'notes.txt'))).toBe(true);
      expect(readdirSync(wal).filter((f) => f.endsWith('.wal') && f !== bad)).toEqual(expect.any(Array));
    } finally {
      g.proc.kill('SIGTERM');
      await g.exited;
    }
  }, 40_000);
});
