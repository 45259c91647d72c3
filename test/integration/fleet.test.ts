import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where the first instance serves with two edge threads.

/**
 * A fleet on loopback: three gateways (child processes, each with its own data
 * directory), one redis-server and one storage server (scripts/chdb-http.mjs).
 */
const admin = `svc_live_${newSecret()}`;
/** One sealing key for the fleet: each instance opens the webhook secrets the others stored. */
const sealing = randomBytes(32).toString('base64');
const auth = { authorization: `Bearer ${admin}`, 'content-type': 'application/json' };

let redis: TestRedis;
let storage: HttpStorage;
let origin: TestServer;
let rx: Receiver;
let dir: string;
const fleet: ChildGateway[] = [];
const owners = new Map<string, ChildGateway>();

function config(onUnavailable: 'open' | 'closed', threads = 1): string {
  const file = join(dir, `${onUnavailable}-${threads}.yaml`);
  writeFileSync(
    file,
    [
      `server: { threads: ${threads} }`,
      'log: { level: info }',
      // Not the 50 ms default: on two cores shared by three gateways, the storage server and
      // the load, a call can take longer, and a decision past it follows on_unavailable.
      `coordination: { redis_url: "${redis.url}", timeout_ms: 500, on_unavailable: ${onUnavailable} }`,
      // Only the fleet's channel can bring a revocation within a second: the poll is a minute.
      'storage: { key_poll_interval_ms: 60000 }',
      'capture: { flush_interval_ms: 50 }',
      'webhooks: { allow_insecure_http: true, allow_private_networks: true, timeout_ms: 1000, jitter: 0, retry_schedule_s: [1, 1, 1, 1, 1, 1, 1] }',
      'environments:',
      '  production: { class: live }',
      'rate_limits:',
      '  default: { limit: 1000000, burst: 1000000, window: minute }',
      'routes:',
      `  - { name: api, prefix: /api, scopes: { read: api:read, write: api:write }, origins: { production: ${origin.url} } }`,
      '',
    ].join('\n'),
  );
  return file;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'wakegate-fleet-'));
  [redis, storage, origin, rx] = await Promise.all([
    startRedis(),
    startHttpStorage(),
    startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('{"ok":true}'));
    }),
    startReceiver(),
  ]);
  // The first with two edge threads where the runtime has SO_REUSEPORT (Node 26 in CI):
  // each thread leases from Redis on its own.
  const first = config('open', 2);
  const open = config('open');
  const closed = config('closed');
  // One at a time: the first applies the migrations.
  for (const [i, file] of [first, open, closed].entries()) {
    const g = await spawnGateway(['serve', '--config', file], {
      DATA_DIR: join(dir, `g${i}`),
      CLICKHOUSE_URL: storage.url,
      WAKEGATE_ADMIN_KEY: admin,
      WAKEGATE_ENCRYPTION_KEY: sealing,
    });
    fleet.push(g);
    const owner = /"msg":"coordination: joined the fleet","owner":"([0-9a-f]+)"/.exec(g.stderr())?.[1];
    expect(owner, g.stderr()).toBeTruthy();
    owners.set(owner as string, g);
  }
}, 120_000);

afterAll(async () => {
  for (const g of fleet) if (g.proc.exitCode === null && g.proc.signalCode === null) g.proc.kill('SIGTERM');
  await Promise.all(fleet.map((g) => g.exited));
  await Promise.all([redis?.stop(), storage?.stop(), origin?.close(), rx?.close()]);
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

async function createKey(g: ChildGateway, rateLimit: object | null) {
  const r = await fetch(`${g.url}/v2/api-keys`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({
      label: 'fleet',
      environment: 'production',
      scopes: ['api:read'],
      ...(rateLimit ? { rate_limit: rateLimit } : {}),
    }),
  });
  expect(r.status, await r.clone().text()).toBe(201);
  const k = (await r.json()) as { id: string; secret: string };
  await known(k.id);
  return k;
}

const call = async (g: ChildGateway, secret: string) => {
  const r = await fetch(`${g.url}/api/x`, { headers: { authorization: `Bearer ${secret}` } });
  await r.arrayBuffer();
  return r.status;
};

/**
 * A key created on one instance reaches the others when they have read it from storage
 * (the fleet's channel names it; nothing on it is taken as a key): waits for that on
 * every instance, asking /v2 (which reads the instance's key ring) so no token is spent.
 */
async function known(id: string) {
  for (const g of fleet) {
    for (let i = 0; i < 250; i++) {
      const r = await fetch(`${g.url}/v2/api-keys/${id}?environment=production`, { headers: auth });
      await r.arrayBuffer();
      if (r.status === 200) break;
      await new Promise((res) => setTimeout(res, 20));
    }
  }
}

/** Sends `n` requests, `share` of them to the first gateway and the rest to the others in turn; counts answers by status. */
async function hammer(secret: string, n: number, concurrency: number, share = 0.7) {
  const counts = new Map<number, number>();
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++) {
      const g = (i % 100) / 100 < share ? fleet[0] : fleet[1 + (i % 2)];
      const s = await call(g as ChildGateway, secret);
      counts.set(s, (counts.get(s) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return counts;
}

describe('a fleet of three on one Redis', () => {
  it('admits exactly the burst of one shared bucket, then its refill rate, however unevenly the load falls', async () => {
    // 300 at once, then one a second.
    const k = await createKey(fleet[0] as ChildGateway, { limit: 3600, burst: 300, window: 'hour' });
    const t0 = performance.now();
    const burst = await hammer(k.secret, 900, 24);
    const burstS = (performance.now() - t0) / 1000;
    const admitted = burst.get(200) ?? 0;
    expect(admitted).toBeGreaterThanOrEqual(300);
    expect(admitted).toBeLessThanOrEqual(300 + Math.ceil(burstS));
    expect(admitted + (burst.get(429) ?? 0)).toBe(900);
    // Then over several seconds, never more than the refill rate.
    let total = admitted;
    for (let s = 0; s < 4; s++) {
      const c = await hammer(k.secret, 120, 6, 0.5);
      total += c.get(200) ?? 0;
      await new Promise((r) => setTimeout(r, 500));
    }
    const elapsed = (performance.now() - t0) / 1000;
    expect(total).toBeLessThanOrEqual(300 + Math.ceil(elapsed));
    // Leases given back or expired within a second: at most that second's tokens go unused.
    expect(total).toBeGreaterThanOrEqual(300 + Math.floor(elapsed) - 3);
    // Every decision was Redis's (none past the timeout, admitted by on_unavailable).
    for (const g of fleet) {
      const m = await (await fetch(`http://127.0.0.1:${g.opsPort}/metrics`)).text();
      expect(m).toMatch(/wakegate_coordination_unavailable_total\{outcome="admitted"\} 0\n/);
    }
  }, 60_000);

  it('refuses a key revoked through one instance on the other two within 100 ms', async () => {
    const k = await createKey(fleet[0] as ChildGateway, null);
    for (const g of fleet) expect(await call(g, k.secret)).toBe(200);
    const r = await fetch(`${fleet[0]?.url}/v2/api-keys/${k.id}`, { method: 'DELETE', headers: auth });
    expect(r.status).toBe(200);
    const revokedAt = performance.now();
    const refusedIn = await Promise.all(
      [fleet[1], fleet[2]].map(async (g) => {
        for (;;) {
          if ((await call(g as ChildGateway, k.secret)) === 401) return performance.now() - revokedAt;
          if (performance.now() - revokedAt > 3000) return Number.POSITIVE_INFINITY;
        }
      }),
    );
    console.log('revocation refused by the others in ms:', refusedIn.map((x) => x.toFixed(1)).join(' '));
    // The channel, not the poll (a minute here), brought it: under 100 ms on a quiet machine
    // (printed above), and well under a second however loaded the machine running the test.
    for (const ms of refusedIn) expect(ms).toBeLessThan(1000);
  });

  it('follows on_unavailable while Redis is down (open admits and counts, closed answers 503, neither hangs), then is exact again', async () => {
    const open = fleet[0] as ChildGateway;
    const closed = fleet[2] as ChildGateway;
    const k = await createKey(open, { limit: 1, burst: 20, window: 'day' });
    expect(await call(closed, k.secret)).toBe(200);
    // Tokens leased before the outage may still be spent (never more than the bucket
    // gave): let that lease lapse, so what follows has to ask Redis.
    await new Promise((r) => setTimeout(r, 1200));
    await redis.stop();
    const t0 = performance.now();
    const during = await Promise.all([...Array(10)].map((_, i) => call(i % 2 ? open : closed, k.secret)));
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(during.filter((_s, i) => i % 2 === 1).every((s) => s === 200)).toBe(true);
    expect(during.filter((_s, i) => i % 2 === 0).every((s) => s === 503)).toBe(true);
    const metrics = await (await fetch(`http://127.0.0.1:${open.opsPort}/metrics`)).text();
    expect(metrics).toMatch(/wakegate_coordination_unavailable_total\{outcome="admitted"\} [1-9]/);
    expect(metrics).toMatch(/wakegate_coordination_up 0/);
    await redis.start();
    // Back within a second (the client reconnects at least every second).
    for (
      let i = 0;
      i < 40 &&
      (await fetch(`http://127.0.0.1:${closed.opsPort}/metrics`).then((r) => r.text())).includes(
        'wakegate_coordination_up 0',
      );
      i++
    )
      await new Promise((r) => setTimeout(r, 100));
    // Leases from before the outage have lapsed by now; a fresh Redis holds a full bucket:
    // exactly its 20 across the two, again.
    await new Promise((r) => setTimeout(r, 1100));
    let ok = 0;
    for (let i = 0; i < 60; i++) if ((await call(i % 2 ? open : closed, k.secret)) === 200) ok++;
    expect(ok).toBe(20);
    const outages = open.stderr().match(/Redis is unavailable/g) ?? [];
    expect(outages).toHaveLength(1);
    expect(open.stderr()).toMatch(/Redis is back/);
  }, 60_000);

  it('attempts a failing delivery on the survivors when the instance holding it is killed, each attempt once, never two at a time', async () => {
    // Attempts in flight per delivery (webhook-id): never two at once.
    const inflight = new Map<string, number>();
    let overlapped = 0;
    rx.answer = (req, res) => {
      const id = String(req.headers['webhook-id']);
      const n = (inflight.get(id) ?? 0) + 1;
      inflight.set(id, n);
      if (n > 1) overlapped++;
      setTimeout(() => {
        inflight.set(id, (inflight.get(id) ?? 1) - 1);
        res.statusCode = 500;
        res.end('no');
      }, 200);
    };
    const r = await fetch(`${fleet[1]?.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ url: rx.url, events: ['key.revoked'] }),
    });
    expect(r.status).toBe(201);
    // Every instance hears of the endpoint through Redis at once (the poll is a minute).
    const k = await createKey(fleet[1] as ChildGateway, null);
    const del = await fetch(`${fleet[1]?.url}/v2/api-keys/${k.id}`, { method: 'DELETE', headers: auth });
    expect(del.status).toBe(200);
    const ours = () => rx.got.filter((x) => x.body.includes(k.id));
    const waitOurs = async (n: number, ms: number) => {
      const until = Date.now() + ms;
      while (ours().length < n && Date.now() < until) await new Promise((res) => setTimeout(res, 20));
      expect(ours().length).toBeGreaterThanOrEqual(n);
    };
    await waitOurs(2, 20_000);
    // The outcomes of the first two stored: an instance killed for good keeps what its log
    // had not yet stored on its own disk (it is stored when it starts again on that data
    // directory), and this test is about what the survivors do (a CI run killed the holder
    // within the log's flush of attempt 2, and storage never heard of it).
    const event = String(ours()[0]?.headers['webhook-id']);
    const stored = async () => {
      const list = await fetch(`${fleet[1]?.url}/v2/webhooks/deliveries?environment=production`, { headers: auth });
      const mine = ((await list.json()) as { data: { id: string; event_id: string }[] }).data;
      const d = mine.find((x) => x.event_id === event);
      if (d === undefined) return false;
      const one = await fetch(`${fleet[1]?.url}/v2/webhooks/deliveries/${d.id}?environment=production`, {
        headers: auth,
      });
      return ((await one.json()) as { attempts: { attempt: number }[] }).attempts.some((a) => a.attempt === 2);
    };
    for (const until = Date.now() + 10_000; !(await stored()) && Date.now() < until; )
      await new Promise((res) => setTimeout(res, 50));
    // Whoever holds the delivery's lease now is killed mid-attempt.
    const deliveryLeases = (await redis.cli('--scan', '--pattern', 'wakegate:wh:l:*')).split('\n').filter(Boolean);
    let victim: ChildGateway | undefined;
    for (let i = 0; i < 50 && !victim; i++) {
      const keys = deliveryLeases.length
        ? deliveryLeases
        : (await redis.cli('--scan', '--pattern', 'wakegate:wh:l:*')).split('\n').filter(Boolean);
      const owner = keys[0] ? await redis.cli('GET', keys[0]) : '';
      victim = owners.get(owner);
      if (!victim) await new Promise((res) => setTimeout(res, 50));
    }
    expect(victim, 'a delivery lease held by one of the fleet').toBeTruthy();
    victim?.proc.kill('SIGKILL');
    await victim?.exited;
    const survivor = fleet.find(
      (g) => g !== victim && g.proc.exitCode === null && g.proc.signalCode === null,
    ) as ChildGateway;
    // Eight attempts in all (the lease of the killed one expires after timeout_ms + 5 s).
    await waitOurs(8, 40_000);
    const ids = new Set(ours().map((x) => x.headers['webhook-id']));
    expect(ids.size, 'one event, fanned out once').toBe(1);
    expect(overlapped, 'two attempts of one delivery at the same time').toBe(0);
    const list = await fetch(`${survivor.url}/v2/webhooks/deliveries?environment=production`, { headers: auth });
    const deliveries = ((await list.json()) as { data: { id: string; event_id: string }[] }).data.filter(
      (d) => d.event_id === [...ids][0],
    );
    expect(deliveries).toHaveLength(1);
    let attempts: number[] = [];
    for (let i = 0; i < 100; i++) {
      const one = await fetch(`${survivor.url}/v2/webhooks/deliveries/${deliveries[0]?.id}?environment=production`, {
        headers: auth,
      });
      const body = (await one.json()) as { status: string; attempts: { attempt: number }[] };
      attempts = body.attempts.map((a) => a.attempt).sort((a, b) => a - b);
      if (body.status === 'dead_lettered' && attempts.length >= 8) break;
      await new Promise((res) => setTimeout(res, 200));
    }
    // Each attempt stored once, in order. One may be missing from storage: the victim's own
    // last one, when it was killed after telling Redis the attempt's outcome (so the survivors
    // went on from the next) and before its log reached storage. That record is on the
    // victim's disk and is stored when it starts again there (the receiver above got all 8).
    expect(new Set(attempts).size, `attempts stored ${attempts}`).toBe(attempts.length);
    const missing = [1, 2, 3, 4, 5, 6, 7, 8].filter((n) => !attempts.includes(n));
    expect(
      attempts.every((n) => n >= 1 && n <= 8),
      `attempts stored ${attempts}`,
    ).toBe(true);
    expect(missing.length, `attempts stored ${attempts}`).toBeLessThanOrEqual(1);
    if (missing.length === 1) expect(missing[0], `attempts stored ${attempts}`).toBeGreaterThan(2);
  }, 90_000);
});
