import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { openStore } from '../../src/store/client.js';
import { queryRows } from '../../src/store/store.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where two threads share the port (on an older Node these tests skip).

/**
 * Edge threads, through the gateway as a child process. Where the runtime
 * has SO_REUSEPORT (Node 22.12 or later on Linux: the Node 26 run of every CI) the
 * gateway serves with two edge threads; elsewhere it says why it serves with one.
 */
const admin = `svc_live_${newSecret()}`;
const auth = { authorization: `Bearer ${admin}` };

let origin: TestServer;
let dir: string;

beforeAll(async () => {
  origin = await startServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('{"ok":true}'));
  });
  dir = mkdtempSync(join(tmpdir(), 'wakegate-threads-'));
  writeFileSync(
    join(dir, 'cfg.yaml'),
    [
      'server: { threads: 2 }',
      'log: { level: info }',
      'capture: { flush_interval_ms: 50 }',
      'storage: { key_poll_interval_ms: 60000 }',
      'environments:',
      '  production: { class: live }',
      '  sandbox: { class: test }',
      'rate_limits:',
      // The load comes from one address: it must not meet the per-address limit of unkeyed requests.
      '  default: { limit: 1000000000, burst: 1000000000, window: minute }',
      '  sandbox: { limit: 1, burst: 150, window: day }',
      '  tight: { limit: 1, burst: 60, window: day }',
      'routes:',
      `  - { name: api, prefix: /api, scopes: { read: api:read, write: api:write }, origins: { production: ${origin.url}, sandbox: ${origin.url} } }`,
      `  - { name: open, prefix: /open, auth: none, rate_limit: tight, origins: { production: ${origin.url} } }`,
      `  - { name: free, prefix: /free, auth: none, origins: { production: ${origin.url} } }`,
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  await origin.close();
  rmSync(dir, { recursive: true, force: true });
});

const start = (data: string, extra: Record<string, string> = {}) =>
  spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
    DATA_DIR: join(dir, data),
    WAKEGATE_ADMIN_KEY: admin,
    WAKEGATE_TEST_HOOKS: '1',
    ...extra,
  });

async function stop(g: ChildGateway): Promise<void> {
  g.proc.kill('SIGTERM');
  const { code, signal } = await g.exited;
  expect({ code, signal }, g.stderr()).toEqual({ code: 0, signal: null });
}

/** One request on a connection of its own (so the kernel chooses a thread for each). */
async function once(url: string, headers: Record<string, string> = {}) {
  const r = await fetch(url, { headers: { connection: 'close', ...headers } });
  const body = await r.text();
  return {
    status: r.status,
    thread: r.headers.get('x-wakegate-thread'),
    remaining: r.headers.get('x-ratelimit-remaining'),
    wake: r.headers.get('x-wake-id'),
    body,
  };
}

/** `total` requests, `concurrency` at a time, each on its own connection. */
async function burst(url: (i: number) => string, total: number, concurrency: number, headers = {}) {
  const out: Awaited<ReturnType<typeof once>>[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < total; i = next++) out.push(await once(url(i), headers));
    }),
  );
  return out;
}

async function createKey(url: string, body: Record<string, unknown>): Promise<{ id: string; secret: string }> {
  const r = await fetch(`${url}/v2/api-keys`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ label: 'load', scopes: ['api:read'], ...body }),
  });
  expect(r.status).toBe(201);
  return (await r.json()) as { id: string; secret: string };
}

/** The stored wakes of a data directory whose gateway has stopped: how many, and how many distinct. */
async function storedWakes(data: string, pathPrefix: string): Promise<{ c: number; u: number }> {
  const cfg = loadConfig({ env: { DATA_DIR: join(dir, data) } });
  const store = await openStore(cfg.storage);
  try {
    const [row] = await queryRows<{ c: string; u: string }>(
      store,
      `SELECT count() AS c, uniqExact(id) AS u FROM ${store.db}.wakes WHERE startsWith(path, {p:String})`,
      { p: pathPrefix },
    );
    return { c: Number(row?.c), u: Number(row?.u) };
  } finally {
    await store.close();
  }
}

describe.runIf(hasReusePort())('two edge threads on one port', () => {
  let g: ChildGateway;
  beforeAll(async () => {
    g = await start('data');
  }, 60_000);
  afterAll(async () => {
    if (g && g.proc.exitCode === null) await stop(g);
  });

  it('says it serves with two threads, and connections land on both', async () => {
    expect(g.stderr()).toMatch(/"msg":"wakegate listening".*"threads":2/);
    const seen = new Set((await burst((i) => `${g.url}/free/spread/${i}`, 60, 6)).map((r) => r.thread));
    expect([...seen].sort()).toEqual(['1', '2']);
  });

  it('/v2 answers whichever thread took the connection, each call a wake', async () => {
    const calls = await burst(() => `${g.url}/v2/api-keys?limit=1`, 40, 4, auth);
    expect(calls.every((c) => c.status === 200 && c.wake?.startsWith('wk_'))).toBe(true);
    expect(new Set(calls.map((c) => c.thread)).size).toBe(2);
  });

  it('one key of burst 100 hammered on both threads: exactly 100 admitted, remaining never repeats', async () => {
    const k = await createKey(g.url, {
      environment: 'production',
      rate_limit: { limit: 1, burst: 100, window: 'day' },
    });
    const rs = await burst((i) => `${g.url}/api/hot/${i}`, 300, 16, { authorization: `Bearer ${k.secret}` });
    const ok = rs.filter((r) => r.status === 200);
    expect(ok).toHaveLength(100);
    expect(rs.filter((r) => r.status === 429)).toHaveLength(200);
    expect(new Set(ok.map((r) => r.thread)).size).toBe(2);
    expect(ok.map((r) => Number(r.remaining)).sort((a, b) => b - a)).toEqual(
      Array.from({ length: 100 }, (_, i) => 99 - i),
    );
  });

  it('the shared sandbox bucket, across keys and threads: exactly its burst', async () => {
    const keys = await Promise.all([1, 2, 3].map(() => createKey(g.url, { environment: 'sandbox' })));
    const byKey = await Promise.all(
      keys.map((k) => burst((i) => `${g.url}/api/sb/${k.id}/${i}`, 100, 8, { authorization: `Bearer ${k.secret}` })),
    );
    const ok = byKey.flat().filter((r) => r.status === 200);
    expect(ok).toHaveLength(150);
    expect(new Set(ok.map((r) => r.thread)).size).toBe(2);
  });

  it('a per-address route limit across threads: exactly its burst', async () => {
    const rs = await burst((i) => `${g.url}/open/${i}`, 150, 16);
    expect(rs.filter((r) => r.status === 200)).toHaveLength(60);
    expect(rs.filter((r) => r.status === 429)).toHaveLength(90);
  });

  it('a key revoked through /v2 is refused by every thread on the very next request', async () => {
    const k = await createKey(g.url, { environment: 'production' });
    const h = { authorization: `Bearer ${k.secret}` };
    const before = await burst((i) => `${g.url}/api/rev/${i}`, 20, 4, h);
    expect(before.every((r) => r.status === 200)).toBe(true);
    expect(new Set(before.map((r) => r.thread)).size).toBe(2);
    const del = await fetch(`${g.url}/v2/api-keys/${k.id}`, { method: 'DELETE', headers: auth });
    expect(del.status).toBe(200);
    const after = await burst((i) => `${g.url}/api/rev/after/${i}`, 20, 4, h);
    expect(after.map((r) => r.status)).toEqual(Array(20).fill(401));
    expect(new Set(after.map((r) => r.thread)).size).toBe(2);
  });

  it('/metrics counts the requests of both threads, and promtool passes', async () => {
    const rs = await burst((i) => `${g.url}/free/counted/${i}`, 50, 5);
    expect(new Set(rs.map((r) => r.thread)).size).toBe(2);
    const text = await (await fetch(`http://127.0.0.1:${g.opsPort}/metrics`)).text();
    const m = /wakegate_requests_total\{route="free",method="GET",status_class="2xx"\} (\d+)/.exec(text);
    // The 60 of the first test and these 50.
    expect(Number(m?.[1])).toBe(110);
    expect(text).toMatch(/^wakegate_edge_threads 2$/m);
    const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(r.error, 'promtool is installed by scripts/ensure-tools.sh (npm test runs it)').toBeUndefined();
    expect(r.status, r.stderr + r.stdout).toBe(0);
  });

  it('an edge thread killed mid-load is started again; the other answered throughout; every answer stored once', async () => {
    const answered: string[] = [];
    let failed = 0;
    let crashed = false;
    let afterCrash = 0;
    let next = 0;
    const total = 600;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = next++; i < total; i = next++) {
          if (i === 150) {
            const hook = await fetch(`http://127.0.0.1:${g.opsPort}/__test/edges/2/crash`, { method: 'POST' });
            expect(hook.status).toBe(202);
            crashed = true;
          }
          try {
            const r = await once(`${g.url}/free/crash/${i}`);
            if (r.status === 200 && r.wake) {
              answered.push(r.wake);
              if (crashed) afterCrash++;
            }
          } catch {
            failed++;
          }
        }
      }),
    );
    // Only requests the dying thread held can fail; the survivor answered the rest.
    expect(failed).toBeLessThan(20);
    expect(afterCrash).toBeGreaterThan(300);
    const metrics = await (await fetch(`http://127.0.0.1:${g.opsPort}/metrics`)).text();
    expect(metrics).toMatch(/^wakegate_edge_restarts_total 1$/m);
    expect(metrics).toMatch(/^wakegate_edge_threads 2$/m);
    expect(g.stderr()).toMatch(/an edge thread died; starting it again/);
    // The restarted thread serves again.
    const seen = new Set((await burst((i) => `${g.url}/free/again/${i}`, 40, 4)).map((r) => r.thread));
    expect(seen.size).toBe(2);
    await stop(g);
    const stored = await storedWakes('data', '/free/crash/');
    expect(stored.u).toBe(stored.c);
    expect(stored.c).toBeGreaterThanOrEqual(answered.length);
  }, 60_000);
});

describe.runIf(hasReusePort())('every wake stored once across threads', () => {
  it('after a clean stop and after SIGKILL', async () => {
    const g1 = await start('once');
    const a = await burst((i) => `${g1.url}/free/clean/${i}`, 300, 8);
    expect(new Set(a.map((r) => r.thread)).size).toBe(2);
    await stop(g1);
    expect(await storedWakes('once', '/free/clean/')).toEqual({ c: 300, u: 300 });

    const g2 = await start('once');
    const b = await burst((i) => `${g2.url}/free/kill/${i}`, 300, 8);
    expect(b.every((r) => r.status === 200)).toBe(true);
    // The write-ahead log's bound: what was answered 50 ms before the kill survives it.
    await new Promise((r) => setTimeout(r, 60));
    g2.proc.kill('SIGKILL');
    await g2.exited;
    // The next start stores what each thread's log holds.
    const g3 = await start('once');
    await stop(g3);
    expect(await storedWakes('once', '/free/kill/')).toEqual({ c: 300, u: 300 });
  }, 90_000);
});

describe.runIf(!hasReusePort())('edge threads where the runtime has no SO_REUSEPORT', () => {
  it('threads resolve to 1, and one line says why', async () => {
    const g = await start('one');
    expect(g.stderr()).toMatch(/"msg":"wakegate listening".*"threads":1/);
    const why = g.stderr().match(/server\.threads is 2, but edge threads share the port with SO_REUSEPORT[^"]*/g);
    expect(why).toHaveLength(1);
    const r = await once(`${g.url}/free/x`);
    expect(r.status).toBe(200);
    expect(r.thread).toBe('1');
    await stop(g);
  });
});
