import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

/**
 * Issue #34 item 8 through the real listeners: a burst-300 key hammered through three
 * gateways of one fleet (600, 200 and 100 requests, 16 in flight each) was admitted
 * 312, 300 and 256 times in three runs. One bucket admits exactly 300 (refilled 300 a
 * day: nothing refills within a run), so the fleet must, every run. (The 312 was
 * on_unavailable: open admitting decisions whose answer a busy event loop read late.)
 */
let redis: TestRedis;
let storage: HttpStorage;
let origin: TestServer;
const fleet: TestGateway[] = [];
const admin = `svc_live_${newSecret()}`;

beforeAll(async () => {
  [redis, storage, origin] = await Promise.all([
    startRedis(),
    startHttpStorage(),
    startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    }),
  ]);
  const values = {
    storage: { clickhouse_url: storage.url, encryption_key: randomBytes(32).toString('base64') },
    // Closed: a decision Redis did not make is a 503, never an admission. Not the 50 ms default
    // timeout: on two shared cores a loaded host can keep redis-server itself off the CPU that long.
    coordination: { redis_url: redis.url, timeout_ms: 1000, on_unavailable: 'closed' },
    routes: [
      {
        name: 'api',
        prefix: '/api',
        scopes: { read: 'api:read', write: 'api:write' },
        origins: { production: origin.url },
      },
    ],
  };
  // One at a time: the first applies the migrations.
  for (let i = 0; i < 3; i++) fleet.push(await startGateway(values, { admin }));
}, 120_000);
// Stopped together: on two cores loaded by other test files, three stops one after the other
// once took past the 60 s hook timeout.
afterAll(async () => {
  await Promise.all(fleet.map((g) => g.cleanup()));
  await Promise.all([redis?.stop(), storage?.stop(), origin?.close()]);
}, 120_000);

/** `n` requests with `inFlight` at a time through `g`; the statuses seen, counted. */
/**
 * Runs through the gateways (each about 10 s on two loaded cores); the ten runs the
 * issue asks for are fleet-exact.test.ts's (the same load on limiters) and bench:fleet's.
 */
const RUNS = 3;

async function hammer(g: TestGateway, secret: string, n: number, inFlight: number): Promise<Map<number, number>> {
  const seen = new Map<number, number>();
  let next = 0;
  const worker = async () => {
    while (next < n) {
      next++;
      const r = await fetch(`${g.url}/api/x`, { headers: bearer(secret) });
      await r.arrayBuffer();
      seen.set(r.status, (seen.get(r.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return seen;
}

describe('a burst-300 key through three gateways, 600/200/100 requests, 16 in flight each', () => {
  it('is admitted exactly 300 times in each run, none of them past Redis', async () => {
    const runs: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const k = await call(fleet[0]?.url as string, admin, 'POST', '/v2/api-keys', {
        label: `uneven-${run}`,
        environment: 'production',
        scopes: ['api:read'],
        rate_limit: { limit: 300, burst: 300, window: 'day' },
      });
      expect(k.status).toBe(201);
      // Every gateway knows the key before the run (asked through /v2: no token spent).
      for (const g of fleet) {
        for (let i = 0; i < 100; i++) {
          const r = await call(g.url, admin, 'GET', `/v2/api-keys/${k.body.id}?environment=production`);
          if (r.status === 200) break;
          await new Promise((res) => setTimeout(res, 50));
        }
      }
      const seen = await Promise.all(
        [600, 200, 100].map((n, i) => hammer(fleet[i] as TestGateway, k.body.secret as string, n, 16)),
      );
      const admitted = seen.reduce((a, s) => a + (s.get(200) ?? 0), 0);
      const refused = seen.reduce((a, s) => a + (s.get(429) ?? 0), 0);
      expect(admitted + refused).toBe(900);
      runs.push(admitted);
    }
    expect(runs).toEqual(Array(RUNS).fill(300));
    // on_unavailable is closed here: a decision Redis did not make would be a 503.
    for (const g of fleet) {
      const m = await (await fetch(`${g.opsUrl}/metrics`)).text();
      expect(m).toMatch(/wakegate_coordination_unavailable_total\{outcome="refused"\} 0\n/);
    }
  }, 300_000);
});
