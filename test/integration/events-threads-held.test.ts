// Regression tests from a review of the event rules (2026-11-27).
// Runs on the Node LTS (bash scripts/test-on-lts.sh <this file>), where two edge threads
// share the port; on an older Node it skips.
// Held: with two edge threads, quota warnings, wake.error and slo.burn are raised once.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

describe.runIf(hasReusePort())('events across two edge threads', () => {
  const admin = `svc_live_${newSecret()}`;
  let dir: string;
  let g: ChildGateway;
  let origin: TestServer;
  let rx: Receiver;
  const auth = { authorization: `Bearer ${admin}` };

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(req.url?.includes('fail') ? 500 : 200);
      res.end('x');
    });
    rx = await startReceiver();
    dir = mkdtempSync(join(tmpdir(), 'wakegate-events-threads-'));
    writeFileSync(
      join(dir, 'cfg.yaml'),
      [
        'server: { threads: 2 }',
        'log: { level: info }',
        'webhooks: { allow_insecure_http: true, allow_private_networks: true }',
        'routes:',
        `  - { name: api, prefix: /api, availability_objective: 0.99, scopes: { read: api:read, write: api:write }, origins: { production: ${origin.url} } }`,
        '',
      ].join('\n'),
    );
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: admin,
      WAKEGATE_TEST_HOOKS: '1',
    });
  }, 60_000);
  afterAll(async () => {
    if (g && g.proc.exitCode === null) {
      g.proc.kill('SIGTERM');
      await g.exited;
    }
    await origin.close();
    await rx.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('one quota warning per threshold, one wake.error per failing wake, one slo.burn', async () => {
    const post = async (path: string, body: unknown) => {
      const r = await fetch(`${g.url}${path}`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      // biome-ignore lint/suspicious/noExplicitAny: read loosely
      return (await r.json()) as any;
    };
    await post('/v2/webhooks/endpoints', { url: rx.url, events: ['*'] });
    const k = await post('/v2/api-keys', {
      environment: 'production',
      scopes: ['api:read'],
      label: 'q',
      rate_limit: { limit: 100, burst: 300, window: 'day' },
    });
    const threads = new Set<string>();
    const rs = await Promise.all(
      Array.from({ length: 150 }, async (_, i) => {
        const r = await fetch(`${g.url}/api/fail/${i}`, {
          headers: { authorization: `Bearer ${k.secret}`, connection: 'close' },
        });
        threads.add(String(r.headers.get('x-wakegate-thread')));
        await r.arrayBuffer();
        return r.status;
      }),
    );
    expect(rs.every((s) => s === 500)).toBe(true);
    expect(threads.size).toBe(2);
    await until(() => rx.got.length >= 153, 15_000, 'deliveries').catch(() => {});
    await new Promise((r) => setTimeout(r, 1000));
    const evs = new Map<string, { type: string; data: Record<string, unknown> }>();
    for (const x of rx.got) {
      const e = JSON.parse(x.body);
      evs.set(e.id, e);
    }
    const of = (type: string) => [...evs.values()].filter((e) => e.type === type);
    expect(of('wake.error')).toHaveLength(150);
    expect(
      of('consumer.quota.warning')
        .map((e) => e.data.threshold)
        .sort(),
    ).toEqual([0.8, 0.95]);
    expect(of('slo.burn')).toHaveLength(1);
  }, 60_000);
});
