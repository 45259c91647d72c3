import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where two threads share the port (on an older Node those tests skip).

/**
 * A rotation does not change how much a consumer may send: a key made with
 * `replaces` spends from the bucket of the key it replaces (the first key of its
 * chain), while the old key is still usable and after it is revoked. Through the
 * real listener: a lone gateway (injected clock), a fleet of two on one Redis, and
 * two edge threads.
 */

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const LIMIT = { limit: 3, burst: 3, window: 'minute' } as const;

let origin: TestServer;

beforeAll(async () => {
  origin = await startServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('{"ok":true}'));
  });
});
afterAll(async () => {
  await origin.close();
});

/** A /v2 call with the admin key: its status and JSON body. */
async function api(base: string, admin: string, method: string, path: string, body?: unknown) {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: { ...bearer(admin), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  // biome-ignore lint/suspicious/noExplicitAny: the tests read API answers loosely
  return { status: r.status, body: (await r.json()) as Record<string, any> };
}

/** Creates a key through POST /v2/api-keys; its id and secret. */
async function createKey(base: string, admin: string, body: Record<string, unknown>) {
  const r = await api(base, admin, 'POST', '/v2/api-keys', {
    environment: 'production',
    scopes: ['api:read'],
    ...body,
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return { id: r.body.id as string, secret: r.body.secret as string };
}

/** One proxied request on a connection of its own: status, the rate-limit headers and the body. */
async function send(base: string, secret: string, path = '/api/x') {
  const r = await fetch(`${base}${path}`, { headers: { ...bearer(secret), connection: 'close' } });
  const text = await r.text();
  const h = (n: string) => r.headers.get(n);
  return {
    status: r.status,
    limit: h('x-ratelimit-limit'),
    remaining: h('x-ratelimit-remaining'),
    reset: h('x-ratelimit-reset'),
    retryAfter: h('retry-after'),
    policy: h('ratelimit-policy'),
    ratelimit: h('ratelimit'),
    thread: h('x-wakegate-thread'),
    text,
  };
}

const routes = (url: string) => [
  { name: 'api', prefix: '/api', scopes: { read: 'api:read', write: 'api:write' }, origins: { production: url } },
];

describe('a rotated key shares the bucket of the key it replaces (a gateway alone, injected clock)', () => {
  const clock = new ManualClock(T0);
  const admin = `svc_live_${newSecret()}`;
  let dir: string;
  let t: TestGateway;
  let old: { id: string; secret: string };
  let next: { id: string; secret: string };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-rotation-'));
    t = await startGateway({ routes: routes(origin.url) }, { clock, admin, dir });
    old = await createKey(t.url, admin, { label: 'deploy v1', rate_limit: LIMIT });
    next = await createKey(t.url, admin, { label: 'deploy v2', replaces: old.id });
  });
  afterAll(async () => {
    await t?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the old key and its replacement, alternately within one window, get one allowance together; then 429s with the documented headers', async () => {
    const rs = [];
    for (let i = 0; i < 8; i++) rs.push(await send(t.url, i % 2 === 0 ? old.secret : next.secret));
    expect(rs.map((r) => r.status)).toEqual([200, 200, 200, 429, 429, 429, 429, 429]);
    // One count: each admitted request, whichever key sent it, takes from the same tokens.
    expect(rs.slice(0, 3).map((r) => r.remaining)).toEqual(['2', '1', '0']);
    for (const r of rs.slice(3)) {
      expect(r).toMatchObject({
        limit: '3',
        remaining: '0',
        reset: '60',
        // One token every 20 s.
        retryAfter: '20',
        policy: '"key";q=3;w=60',
        ratelimit: '"key";r=0;t=60',
      });
      expect(JSON.parse(r.text).error).toMatchObject({ type: 'rate_limit_exceeded', retry_after: 20 });
    }
  });

  it('a rotation hands out no fresh burst: the replacement of a spent key is refused, before and after the old key is revoked', async () => {
    clock.advance(3_600_000);
    old = await createKey(t.url, admin, { label: 'spent v1', rate_limit: LIMIT });
    const spent = [];
    for (let i = 0; i < 3; i++) spent.push((await send(t.url, old.secret)).status);
    expect(spent).toEqual([200, 200, 200]);
    next = await createKey(t.url, admin, { label: 'spent v2', replaces: old.id });
    expect(await send(t.url, next.secret)).toMatchObject({ status: 429, retryAfter: '20', remaining: '0' });
    const at = clock.now() + 10_000;
    const d = await api(t.url, admin, 'DELETE', `/v2/api-keys/${old.id}`, { revoke_at: new Date(at).toISOString() });
    expect(d.status).toBe(200);
    clock.set(at);
    const gone = await send(t.url, old.secret);
    expect(gone.status).toBe(401);
    expect(JSON.parse(gone.text).error.type).toBe('key_revoked');
    // Half a token refilled: still refused, told the true wait.
    expect(await send(t.url, next.secret)).toMatchObject({ status: 429, retryAfter: '10', remaining: '0' });
    clock.advance(10_000);
    expect(await send(t.url, next.secret)).toMatchObject({ status: 200, remaining: '0' });
    expect(await send(t.url, next.secret)).toMatchObject({ status: 429, retryAfter: '20' });
  });

  it('after a restart the replacement still spends from the bucket of the key it replaced', async () => {
    await t.stop();
    t = await startGateway({ routes: routes(origin.url) }, { clock, admin, dir });
    expect(await send(t.url, next.secret)).toMatchObject({ status: 429, retryAfter: '20' });
    // A whole window later the bucket is full again: its burst, once.
    clock.advance(60_000);
    const rs = [];
    for (let i = 0; i < 4; i++) rs.push((await send(t.url, next.secret)).status);
    expect(rs).toEqual([200, 200, 200, 429]);
  });

  it('a chain A→B→C spends from the bucket of A, whichever of the three is used', async () => {
    clock.advance(3_600_000);
    const a = await createKey(t.url, admin, { label: 'chain a', rate_limit: LIMIT });
    const b = await createKey(t.url, admin, { label: 'chain b', replaces: a.id });
    const c = await createKey(t.url, admin, { label: 'chain c', replaces: b.id });
    const keys = [a, b, c];
    const rs = [];
    for (let i = 0; i < 9; i++) rs.push((await send(t.url, (keys[i % 3] as { secret: string }).secret)).status);
    expect(rs).toEqual([200, 200, 200, 429, 429, 429, 429, 429, 429]);
    // A and B revoked at once: C, the one left, has no fresh burst either.
    for (const k of [a, b]) expect((await api(t.url, admin, 'DELETE', `/v2/api-keys/${k.id}`)).status).toBe(200);
    expect(await send(t.url, c.secret)).toMatchObject({ status: 429, retryAfter: '20' });
    // A fresh key (no rotation) keeps a bucket of its own.
    const other = await createKey(t.url, admin, { label: 'unrelated', rate_limit: LIMIT });
    expect((await send(t.url, other.secret)).status).toBe(200);
  });
});

describe('a rotated key shares the bucket of the key it replaces across a fleet (two gateways, one Redis)', () => {
  const admin = `svc_live_${newSecret()}`;
  // Refill is negligible within the test (Redis's clock, not the injected one, refills a fleet's buckets).
  const DAY = { limit: 3, burst: 3, window: 'day' } as const;
  let redis: TestRedis;
  let storage: HttpStorage;
  const gws: TestGateway[] = [];

  beforeAll(async () => {
    [redis, storage] = await Promise.all([startRedis(), startHttpStorage()]);
    const values = {
      storage: {
        clickhouse_url: storage.url,
        encryption_key: randomBytes(32).toString('base64'),
        key_poll_interval_ms: 200,
      },
      coordination: { redis_url: redis.url, timeout_ms: 500 },
      routes: routes(origin.url),
    };
    gws.push(await startGateway(values, { admin }));
    gws.push(await startGateway(values, { admin }));
  }, 120_000);
  afterAll(async () => {
    for (const g of gws) await g.cleanup();
    await Promise.all([redis?.stop(), storage?.stop()]);
  }, 60_000);

  it('the old key on one instance and its replacement on the other: one allowance for the fleet, one bucket in Redis', async () => {
    const [g1, g2] = gws as [TestGateway, TestGateway];
    const old = await createKey(g1.url, admin, { label: 'fleet v1', rate_limit: DAY });
    // The rotation is made on the other instance, from what it read of the old key.
    const deadline = Date.now() + 10_000;
    while ((await api(g2.url, admin, 'GET', `/v2/api-keys/${old.id}`)).status !== 200) {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 50));
    }
    const next = await createKey(g2.url, admin, { label: 'fleet v2', replaces: old.id });
    // Each instance learns the new key from storage (the announcement names only its id).
    for (const g of gws) {
      while ((await api(g.url, admin, 'GET', `/v2/api-keys/${next.id}`)).status !== 200) {
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const rs = [];
    for (let i = 0; i < 5; i++) {
      rs.push(await send(g1.url, old.secret));
      rs.push(await send(g2.url, next.secret));
      rs.push(await send(g1.url, next.secret));
    }
    expect(rs.filter((r) => r.status === 200)).toHaveLength(3);
    expect(rs.filter((r) => r.status === 429)).toHaveLength(12);
    for (const r of rs.filter((x) => x.status === 429)) expect(r.limit).toBe('3');
    const buckets = (await redis.cli('--scan', '--pattern', '*wg:b:k:*')).split('\n').filter(Boolean);
    expect(buckets.some((b) => b.includes(old.id))).toBe(true);
    expect(buckets.filter((b) => b.includes(next.id))).toEqual([]);
  });
});

describe.runIf(hasReusePort())('a rotated key shares the bucket of the key it replaces across edge threads', () => {
  const admin = `svc_live_${newSecret()}`;
  let dir: string;
  let g: ChildGateway;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-rotation-threads-'));
    writeFileSync(
      join(dir, 'cfg.yaml'),
      [
        'server: { threads: 2 }',
        'log: { level: info }',
        'storage: { key_poll_interval_ms: 60000 }',
        'routes:',
        `  - { name: api, prefix: /api, scopes: { read: api:read, write: api:write }, origins: { production: ${origin.url} } }`,
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
    rmSync(dir, { recursive: true, force: true });
  });

  it('old and new keys, each request on its own connection across both threads: exactly one burst admitted', async () => {
    const old = await createKey(g.url, admin, {
      label: 'threads v1',
      rate_limit: { limit: 1, burst: 20, window: 'day' },
    });
    const next = await createKey(g.url, admin, { label: 'threads v2', replaces: old.id });
    const rs = await Promise.all(
      Array.from({ length: 60 }, (_, i) => send(g.url, i % 2 === 0 ? old.secret : next.secret, `/api/t/${i}`)),
    );
    const ok = rs.filter((r) => r.status === 200);
    expect(ok).toHaveLength(20);
    expect(new Set(rs.map((r) => r.thread)).size).toBe(2);
    expect(ok.map((r) => Number(r.remaining)).sort((a, b) => b - a)).toEqual(
      Array.from({ length: 20 }, (_, i) => 19 - i),
    );
  });
});
