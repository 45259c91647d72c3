import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY } from '../helpers/child.js';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

/**
 * Redis going away, through the real listeners: the gateway keeps limiting each key
 * at its share (on_unavailable: local, the default), /readyz and /metrics say so, and
 * it comes back when Redis does. And a fleet on the embedded store is refused at start.
 */
let redis: TestRedis;
let storage: HttpStorage;
let origin: TestServer;
let t: TestGateway;

beforeAll(async () => {
  [redis, storage, origin] = await Promise.all([
    startRedis(),
    startHttpStorage(),
    startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    }),
  ]);
  t = await startGateway({
    storage: { clickhouse_url: storage.url },
    coordination: { redis_url: redis.url, timeout_ms: 500 },
    routes: [
      {
        name: 'api',
        prefix: '/api',
        scopes: { read: 'api:read', write: 'api:write' },
        origins: { production: origin.url },
      },
    ],
  });
});
afterAll(async () => {
  await t?.cleanup();
  await Promise.all([redis?.stop(), storage?.stop(), origin?.close()]);
});

const readyz = async () => (await (await fetch(`${t.opsUrl}/readyz`)).json()) as Record<string, unknown>;
const metric = async (line: RegExp) => {
  const text = await (await fetch(`${t.opsUrl}/metrics`)).text();
  return Number(line.exec(text)?.[1] ?? Number.NaN);
};

describe('a fleet gateway while Redis is away (on_unavailable: local)', () => {
  it('keeps limiting each key at its share, shows it in /readyz and /metrics, and comes back with Redis', async () => {
    expect(await readyz()).toMatchObject({
      status: 'ready',
      coordination: { redis: 'up', on_unavailable: 'local', instances: 1 },
    });
    expect(await metric(/^wakegate_coordination_on_unavailable\{mode="local"\} (\d+)/m)).toBe(1);
    const k = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'outage',
      environment: 'production',
      scopes: ['api:read'],
      rate_limit: { limit: 10, burst: 10, window: 'day' },
    });
    expect(k.status).toBe(201);
    const get = async () => (await fetch(`${t.url}/api/x`, { headers: bearer(k.body.secret as string) })).status;
    const before: number[] = [];
    for (let i = 0; i < 4; i++) before.push(await get());
    expect(before).toEqual([200, 200, 200, 200]);

    await redis.stop();
    const during: number[] = [];
    for (let i = 0; i < 10; i++) during.push(await get());
    // One instance alive in the last minute: its share is the whole bucket, which holds 6.
    expect(during.filter((s) => s === 200)).toHaveLength(6);
    expect(during.filter((s) => s === 429)).toHaveLength(4);
    expect(await readyz()).toMatchObject({
      status: 'degraded',
      coordination: { redis: 'down', on_unavailable: 'local' },
    });
    expect(await metric(/^wakegate_coordination_up (\d+)/m)).toBe(0);
    expect(await metric(/^wakegate_coordination_unavailable_total\{outcome="refused"\} (\d+)/m)).toBe(4);

    await redis.start();
    const until = Date.now() + 10_000;
    while ((await readyz()).status !== 'ready' && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    expect(await readyz()).toMatchObject({ status: 'ready', coordination: { redis: 'up' } });
    expect(await metric(/^wakegate_coordination_up (\d+)/m)).toBe(1);
  });
});

describe('a fleet on the embedded store', () => {
  it('is refused at start in one line naming CLICKHOUSE_URL', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-fleet-embedded-'));
    try {
      const r = await new Promise<{ code: number; stderr: string }>((resolve) =>
        execFile(
          process.execPath,
          [...GATEWAY, 'serve'],
          {
            env: {
              PATH: process.env.PATH ?? '',
              PORT: '0',
              OPS_PORT: '0',
              HOST: '127.0.0.1',
              DATA_DIR: dir,
              ORIGIN_URL: 'http://127.0.0.1:9',
              REDIS_URL: redis.url,
            },
            timeout: 30_000,
          },
          (err, _stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
        ),
      );
      expect(r.code).toBe(1);
      const lines = r.stderr.trim().split('\n');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(/^config: .*CLICKHOUSE_URL/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
