import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOG_SEGMENT_TAG, wakeLogCodec } from '../../src/capture/wake-log.js';
import { newSecret, newWakeId } from '../../src/ids.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';
import { wakeRow } from '../helpers/wakes.js';

/**
 * A segment of the wake log that this version reads but storage refuses, every time
 * (here a status written `1e3`, as a flipped bit on disk can make one): it stayed at the
 * head of the backlog, every later batch waited behind it, and no wake was stored again
 * until the log's disk budget filled and every new one was dropped. From a review of
 * durability; the test failed first.
 */
describe('a segment storage always refuses', () => {
  let origin: TestServer;
  let dir: string;
  const admin = `svc_live_${newSecret()}`;
  const auth = { authorization: `Bearer ${admin}` };

  beforeAll(async () => {
    origin = await startServer((_req, res) => res.end('ok'));
    dir = mkdtempSync(join(tmpdir(), 'wakegate-wal-refused-'));
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

  it('is set aside under its name, and the wakes behind it are stored', async () => {
    const wal = join(dir, 'data', 'wal', 'wakes');
    mkdirSync(wal, { recursive: true, mode: 0o700 });
    const codec = wakeLogCodec(() => 30);
    const at = Date.now() - 60_000;
    const line = (path: string, i: number) => {
      const e = codec.encode(wakeRow({ id: newWakeId(at + i), captured_at: at + i, path, environment: 'production' }));
      return typeof e === 'string' ? `${e}\n` : '';
    };
    const poisoned = line('/poison/1', 0).replace('\t200\t', '\t1e3\t');
    expect(codec.decode(poisoned.slice(0, -1)).status).toBe(1000);
    const seg = (ms: number, seq: number) => `${String(ms).padStart(14, '0')}-review-${seq}.${LOG_SEGMENT_TAG}.wal`;
    const bad = seg(at, 0);
    writeFileSync(join(wal, bad), poisoned, { mode: 0o600 });
    // A good segment behind it, of the same earlier run.
    writeFileSync(join(wal, seg(at + 1, 1)), line('/behind/1', 1), { mode: 0o600 });
    const g = await spawnGateway(['serve'], {
      DATA_DIR: join(dir, 'data'),
      ORIGIN_URL: origin.url,
      WAKEGATE_ADMIN_KEY: admin,
    });
    try {
      expect((await fetch(`${g.url}/after/1`)).status).toBe(200);
      await until(async () => (await paths(g, '/after/')).length === 1, 20_000, 'a new wake stored');
      expect(await paths(g, '/behind/')).toEqual(['/behind/1']);
      expect(await paths(g, '/poison/')).toEqual([]);
      // Nothing is deleted: the refused segment is kept for an operator, named so.
      expect(readdirSync(wal)).toContain(`${bad}.refused`);
      expect(g.stderr()).toContain('refused');
      const m = await (await fetch(`http://127.0.0.1:${g.opsPort}/metrics`)).text();
      expect(m).toMatch(/wakegate_wakes_dropped_total\{reason="storage_refused"\} 1/);
      expect(g.proc.exitCode).toBe(null);
    } finally {
      g.proc.kill('SIGTERM');
      await g.exited;
    }
  }, 60_000);
});
