import { randomBytes } from 'node:crypto';
import { createClient, type RedisClientType } from '@redis/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

/**
 * Redis does not hold the rate limits' bound, through the real listener: a gateway of a
 * fleet (storage server, redis-server), a key of burst 30, and an attacker with a client
 * of their own on the fleet's Redis who deletes or rewrites its bucket between requests.
 */
const admin = `svc_live_${newSecret()}`;
let redis: TestRedis;
let storage: HttpStorage;
let origin: TestServer;
let gw: TestGateway;
let attacker: RedisClientType;

beforeAll(async () => {
  [redis, storage, origin] = await Promise.all([
    startRedis(),
    startHttpStorage(),
    startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('{"ok":true}'));
    }),
  ]);
  gw = await startGateway(
    {
      storage: {
        clickhouse_url: storage.url,
        encryption_key: randomBytes(32).toString('base64'),
        key_poll_interval_ms: 60_000,
      },
      coordination: { redis_url: redis.url, timeout_ms: 500 },
      routes: [
        {
          name: 'api',
          prefix: '/api',
          scopes: { read: 'api:read', write: 'api:write' },
          origins: { production: origin.url },
        },
      ],
    },
    { admin },
  );
  attacker = createClient({ url: redis.url }) as RedisClientType;
  attacker.on('error', () => {});
  await attacker.connect();
}, 120_000);

afterAll(async () => {
  await attacker?.close().catch(() => {});
  await gw?.cleanup();
  await Promise.all([redis?.stop(), storage?.stop(), origin?.close()]);
}, 60_000);

async function keyOfBurst30(): Promise<string> {
  const r = await fetch(`${gw.url}/v2/api-keys`, {
    method: 'POST',
    headers: { ...bearer(admin), 'content-type': 'application/json' },
    body: JSON.stringify({
      label: 'tamper',
      environment: 'production',
      scopes: ['api:read'],
      rate_limit: { limit: 30, burst: 30, window: 'day' },
    }),
  });
  expect(r.status, await r.clone().text()).toBe(201);
  return ((await r.json()) as { secret: string }).secret;
}

/** Every bucket hash and lease set of the fleet, as the attacker finds them. */
const buckets = async () => ((await attacker.sendCommand(['KEYS', '*wg:b:*'])) as string[]) ?? [];

describe('a key of burst 30 through a gateway whose Redis an attacker rewrites', () => {
  for (const [name, op] of [
    ['DEL of every bucket', async (ks: string[]) => void (await attacker.del(ks))],
    [
      'HSET tok 1e12 on every bucket',
      async (ks: string[]) => {
        for (const b of ks.filter((x) => !x.endsWith(':l'))) await attacker.hSet(b, 'tok', '1e12');
      },
    ],
  ] as const) {
    it(`admits at most 30 of 200 requests under ${name} between every five`, async () => {
      const secret = await keyOfBurst30();
      let admitted = 0;
      let refused = 0;
      for (let round = 0; round < 40; round++) {
        const ks = await buckets();
        if (ks.length > 0) await op(ks);
        const rs = await Promise.all(
          Array.from({ length: 5 }, () => fetch(`${gw.url}/api/x`, { headers: bearer(secret) })),
        );
        for (const r of rs) {
          await r.arrayBuffer();
          if (r.status === 200) admitted++;
          else if (r.status === 429) refused++;
        }
      }
      expect(admitted + refused).toBe(200);
      expect(admitted).toBeLessThanOrEqual(30);
      expect(admitted).toBeGreaterThan(0);
    }, 60_000);
  }
});
