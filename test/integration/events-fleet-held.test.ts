// Regression tests from a review of the event rules (2026-11-27).
// A fleet of two gateways on one Redis (and one storage over HTTP), through the listeners:
// each event once for the fleet (DESIGN "Once per fleet": consumer.quota.warning and slo.burn),
// wake.error once per failing wake, and an instance's restart does not raise slo.burn again.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

describe('events in a fleet of two', () => {
  const admin = `svc_live_${newSecret()}`;
  let redis: TestRedis;
  let storage: HttpStorage;
  let origin: TestServer;
  let rx: Receiver;
  const gws: TestGateway[] = [];
  let values: Record<string, unknown>;

  beforeAll(async () => {
    [redis, storage] = await Promise.all([startRedis(), startHttpStorage()]);
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(500);
      res.end('x');
    });
    rx = await startReceiver();
    values = {
      storage: {
        clickhouse_url: storage.url,
        encryption_key: randomBytes(32).toString('base64'),
        key_poll_interval_ms: 200,
      },
      coordination: { redis_url: redis.url, timeout_ms: 500 },
      webhooks: { allow_insecure_http: true, allow_private_networks: true },
      routes: [
        {
          name: 'api',
          prefix: '/api',
          availability_objective: 0.99,
          scopes: { read: 'api:read', write: 'api:write' },
          origins: { production: origin.url },
        },
      ],
    };
    gws.push(await startGateway(values, { admin }));
    gws.push(await startGateway(values, { admin }));
  }, 120_000);
  afterAll(async () => {
    for (const g of gws) await g.cleanup();
    await Promise.all([redis?.stop(), storage?.stop(), origin?.close(), rx?.close()]);
  }, 60_000);

  const byType = () => {
    const evs = new Map<string, { type: string; data: Record<string, unknown> }>();
    for (const x of rx.got) {
      const e = JSON.parse(x.body);
      evs.set(e.id, e);
    }
    return (type: string) => [...evs.values()].filter((e) => e.type === type);
  };

  it('one slo.burn, one warning per threshold, one wake.error per wake; none again after a restart', async () => {
    const [g1, g2] = gws as [TestGateway, TestGateway];
    const r = await fetch(`${g1.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...bearer(admin), 'content-type': 'application/json' },
      body: JSON.stringify({ url: rx.url, events: ['*'] }),
    });
    expect(r.status).toBe(201);
    const k = await fetch(`${g1.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(admin), 'content-type': 'application/json' },
      body: JSON.stringify({
        environment: 'production',
        scopes: ['api:read'],
        label: 'q',
        rate_limit: { limit: 200, burst: 1000, window: 'day' },
      }),
    });
    const key = (await k.json()) as { secret: string };
    // Both instances know the key and the endpoint.
    await until(
      async () => (await fetch(`${g2.url}/api/warm`, { headers: bearer(key.secret) })).status === 500,
      10_000,
      'key on g2',
    );
    for (let i = 0; i < 240; i++) {
      const g = i % 2 ? g1 : g2;
      await (await fetch(`${g.url}/api/fail/${i}`, { headers: bearer(key.secret) })).arrayBuffer();
    }
    await until(() => byType()('wake.error').length >= 241, 20_000, 'wake.error deliveries').catch(() => {});
    await new Promise((res) => setTimeout(res, 1500));
    let of = byType();
    expect(of('wake.error')).toHaveLength(241);
    expect(
      of('consumer.quota.warning')
        .map((e) => e.data.threshold)
        .sort(),
    ).toEqual([0.8, 0.95]);
    expect(of('slo.burn')).toHaveLength(1);
    // g2 restarts (clean); the burn goes on.
    await g2.stop();
    gws[1] = await startGateway(values, { admin });
    const g3 = gws[1] as TestGateway;
    for (let i = 0; i < 120; i++)
      await (await fetch(`${g3.url}/api/fail/again/${i}`, { headers: bearer(key.secret) })).arrayBuffer();
    await new Promise((res) => setTimeout(res, 2500));
    of = byType();
    expect(of('slo.burn')).toHaveLength(1);
    expect(of('consumer.quota.warning')).toHaveLength(2);
  }, 120_000);
});
