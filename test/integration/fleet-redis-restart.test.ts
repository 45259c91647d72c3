import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

/**
 * Redis holds a fleet's queue of deliveries, not their record: when it restarts empty,
 * a delivery waiting for its next attempt is neither lost nor attempted twice at once.
 */
let redis: TestRedis;
let rx: Receiver;
let t: TestGateway;
/** A fleet shares its storage (REDIS_URL with the embedded store is refused at start). */
let storage: HttpStorage;

beforeAll(async () => {
  [redis, rx, storage] = await Promise.all([startRedis(), startReceiver(), startHttpStorage()]);
  t = await startGateway({
    storage: { clickhouse_url: storage.url },
    coordination: { redis_url: redis.url, timeout_ms: 500 },
    webhooks: {
      allow_insecure_http: true,
      allow_private_networks: true,
      jitter: 0,
      retry_schedule_s: [1, 1, 1, 1, 1, 1, 1],
    },
  });
});
afterAll(async () => {
  await t?.cleanup();
  await Promise.all([rx?.close(), redis?.stop(), storage?.stop()]);
});

describe('a fleet whose Redis restarts empty', () => {
  it('goes on with a delivery waiting for its next attempt, numbered on, and finishes it once', async () => {
    // Fails twice, then takes it.
    rx.answer = (_req, res, n) => {
      res.statusCode = n <= 2 ? 500 : 200;
      res.end();
    };
    const auth = { ...bearer(t.admin), 'content-type': 'application/json' };
    const ep = await fetch(`${t.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ url: rx.url, events: ['key.revoked'] }),
    });
    expect(ep.status).toBe(201);
    const k = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ label: 'gone', environment: 'production', scopes: ['wakes:read'] }),
    });
    const key = (await k.json()) as { id: string };
    expect((await fetch(`${t.url}/v2/api-keys/${key.id}`, { method: 'DELETE', headers: auth })).status).toBe(200);
    await rx.waitFor(1, 10_000);
    // The first attempt failed; its retry is a second away. Redis loses everything now.
    await redis.stop();
    await redis.start();
    await rx.waitFor(3, 20_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(rx.got).toHaveLength(3);
    expect(new Set(rx.got.map((g) => g.headers['webhook-id'])).size).toBe(1);
    const list = await fetch(`${t.url}/v2/webhooks/deliveries?environment=production`, { headers: auth });
    const [d] = ((await list.json()) as { data: { id: string; status: string; attempt: number }[] }).data;
    expect(d).toMatchObject({ status: 'delivered', attempt: 3 });
  }, 40_000);
});
