import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { load, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';

describe('the gateway as a process', () => {
  let origin: TestServer;
  let dir: string;
  const admin = `svc_live_${newSecret()}`;

  beforeAll(async () => {
    origin = await startServer((_req, res) => res.end('{"ok":true}'));
    dir = mkdtempSync(join(tmpdir(), 'wakegate-life-'));
    // Nothing flushes on its own during the run: only the SIGTERM flush can save the wakes.
    writeFileSync(
      join(dir, 'cfg.yaml'),
      'capture:\n  batch_rows: 1000000\n  flush_interval_ms: 600000\n  max_buffered_rows: 1000000\nlog:\n  level: info\n',
    );
  });
  afterAll(async () => {
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('ORIGIN_URL drop-in: 10,000 requests, SIGTERM flushes them all, a restart pages through each exactly once', async () => {
    const env = { DATA_DIR: join(dir, 'data'), ORIGIN_URL: origin.url, WAKEGATE_ADMIN_KEY: admin };
    const g1 = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], env);
    const served = await load((i) => `${g1.url}/t/${i}?q=${i}`, 10_000, 50);
    expect(served).toBe(10_000);
    g1.proc.kill('SIGTERM');
    expect(await g1.exited).toEqual({ code: 0, signal: null });
    expect(g1.stderr()).not.toContain(admin.slice(9));

    const g2 = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], env);
    try {
      const ids = new Set<string>();
      const paths = new Set<string>();
      let cursor: string | null = null;
      let prev = '';
      do {
        const r: Response = await fetch(
          `${g2.url}/v2/wakes?path=/t/{n}&limit=100${cursor ? `&cursor=${cursor}` : ''}`,
          {
            headers: { authorization: `Bearer ${admin}` },
          },
        );
        expect(r.status).toBe(200);
        const page = (await r.json()) as {
          data: { id: string; path: string; captured_at: string }[];
          next_cursor: string | null;
        };
        for (const w of page.data) {
          const k = `${w.captured_at}|${w.id}`;
          if (prev) expect(k < prev).toBe(true);
          prev = k;
          ids.add(w.id);
          paths.add(w.path);
        }
        cursor = page.next_cursor;
      } while (cursor);
      expect(ids.size).toBe(10_000);
      expect(paths.size).toBe(10_000);
    } finally {
      g2.proc.kill('SIGTERM');
      expect((await g2.exited).code).toBe(0);
    }
  }, 120_000);

  it('prints a generated admin key once on a first start, and never again', async () => {
    const env = { DATA_DIR: join(dir, 'fresh'), ORIGIN_URL: origin.url };
    // A first start that fails (its port is taken) leaves no key behind that was never shown.
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = String((taken.address() as net.AddressInfo).port);
    await expect(spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], { ...env, PORT: port })).rejects.toThrow(
      /PORT \d+ is in use \(server\.port\)/,
    );
    await new Promise<void>((r) => taken.close(() => r()));
    const g1 = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], env);
    g1.proc.kill('SIGTERM');
    await g1.exited;
    const printed = /(svc_live_[0-9A-Za-z]{43})/.exec(g1.stdout())?.[1] ?? '';
    expect(printed).not.toBe('');
    expect(g1.stderr()).not.toContain(printed.slice(9));
    const g2 = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], env);
    try {
      expect(g2.stdout()).not.toMatch(/svc_live_/);
      const r = await fetch(`${g2.url}/v2/wakes?limit=1`, { headers: { authorization: `Bearer ${printed}` } });
      expect(r.status).toBe(200);
    } finally {
      g2.proc.kill('SIGTERM');
      await g2.exited;
    }
  }, 60_000);

  it('log.access: true writes one JSON line per request on stdout', async () => {
    writeFileSync(join(dir, 'access.yaml'), 'log: { access: true }\n');
    const g = await spawnGateway(['serve', '--config', join(dir, 'access.yaml')], {
      DATA_DIR: join(dir, 'access'),
      ORIGIN_URL: origin.url,
      WAKEGATE_ADMIN_KEY: `svc_live_${newSecret()}`,
    });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await fetch(`${g.url}/a/${i}`)).headers.get('x-wake-id') as string);
      await new Promise((r) => setTimeout(r, 100));
      const lines = g
        .stdout()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l));
      // Each edge thread writes its own lines: across threads they may come in any order.
      const access = lines.filter((l) => l.msg === 'access');
      expect(access.map((l) => l.wake_id).sort()).toEqual([...ids].sort());
      expect(access.find((l) => l.path === '/a/0')).toMatchObject({
        level: 'info',
        method: 'GET',
        status: 200,
        route: 'default',
      });
    } finally {
      g.proc.kill('SIGTERM');
      await g.exited;
    }
  }, 60_000);

  it('refuses a bad config with one line naming the key, and a non-zero exit', async () => {
    writeFileSync(join(dir, 'bad.yaml'), 'capture:\n  batch_rows: lots\n');
    await expect(
      spawnGateway(['serve', '--config', join(dir, 'bad.yaml')], { DATA_DIR: join(dir, 'x') }),
    ).rejects.toThrow(/exited with 1 before listening:\nconfig: capture\.batch_rows: .*\n$/);
  });
});
