// Regression tests from a review of durability (2026-11-28).
/**
 * A wake log line torn by a kill so that it holds exactly 32 fields is taken for a line of
 * the format before migration 16 (wake-log.ts decode, FIELD_COUNT_15) and stored with its
 * fields shifted (refused flag and detail lost), instead of being detected and skipped
 * (docs/durability.md: "A record torn by a kill in the middle of a write is detected and
 * skipped (only that record is lost)").
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a torn last line of a wake log segment after SIGKILL', () => {
  let origin: TestServer;
  let dir: string;
  let g: ChildGateway | null = null;
  const admin = `svc_live_${newSecret()}`;
  const auth = { authorization: `Bearer ${admin}` };

  beforeAll(async () => {
    origin = await startServer((_q, res) => res.end('ok'));
    dir = mkdtempSync(join(tmpdir(), 'wg-torn-'));
    writeFileSync(
      join(dir, 'cfg.yaml'),
      'server:\n  threads: 1\ncapture:\n  flush_interval_ms: 600000\n  batch_rows: 100000\nrate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\n',
    );
  });
  afterAll(async () => {
    if (g && g.proc.exitCode === null && g.proc.signalCode === null) {
      g.proc.kill('SIGKILL');
      await g.exited;
    }
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is skipped, never stored with its fields shifted', async () => {
    const env = { DATA_DIR: join(dir, 'data'), ORIGIN_URL: origin.url, WAKEGATE_ADMIN_KEY: admin };
    const args = ['serve', '--config', join(dir, 'cfg.yaml')];
    g = await spawnGateway(args, env);
    const ok = await fetch(`${g.url}/whole`);
    await ok.arrayBuffer();
    const okId = ok.headers.get('x-wake-id') as string;
    const bad = await fetch(`${g.url}/torn`, {
      method: 'POST',
      body: '{"amount":42}',
      headers: { 'content-type': 'application/json' },
    });
    await bad.arrayBuffer();
    const badId = bad.headers.get('x-wake-id') as string;
    expect(badId).toBeTruthy();
    await sleep(300); // well past wal.sync_interval_ms
    g.proc.kill('SIGKILL');
    await g.exited;

    // The segment as a kill in the middle of the last line's write leaves it.
    const walDir = join(dir, 'data', 'wal', 'wakes');
    const segs = readdirSync(walDir).filter((f) => f.endsWith('.wal'));
    let found = false;
    for (const f of segs) {
      const lines = readFileSync(join(walDir, f), 'utf8')
        .split('\n')
        .filter((l) => l !== '');
      const i = lines.findIndex((l) => l.startsWith(`${badId}\t`));
      if (i === -1) continue;
      found = true;
      const torn = (lines[i] as string).split('\t').slice(0, 32).join('\t');
      writeFileSync(join(walDir, f), `${lines.slice(0, i).join('\n')}${i > 0 ? '\n' : ''}${torn}`);
    }
    expect(found).toBe(true);

    g = await spawnGateway(args, env);
    // The whole wake is stored from the backlog.
    let okStored = false;
    for (let i = 0; i < 100 && !okStored; i++) {
      okStored = (await fetch(`${g.url}/v2/wakes/${okId}`, { headers: auth })).status === 200;
      if (!okStored) await sleep(100);
    }
    expect(okStored).toBe(true);
    const r = await fetch(`${g.url}/v2/wakes/${badId}`, { headers: auth });
    const body = await r.text();
    // The torn record must be skipped (lost), not stored as a different wake.
    expect(r.status, body).toBe(404);
  }, 60_000);
});
