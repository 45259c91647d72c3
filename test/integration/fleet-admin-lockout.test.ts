import { randomBytes } from 'node:crypto';
import { createClient, type RedisClientType } from '@redis/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

/**
 * DESIGN: whoever writes to the fleet's Redis can miscount buckets, never lock out the
 * admin. Through the real listener: an attacker empties every bucket hash in Redis
 * between the admin's calls to /v2.
 */
const admin = `svc_live_${newSecret()}`;
let redis: TestRedis;
let storage: HttpStorage;
let gw: TestGateway;
let attacker: RedisClientType;

beforeAll(async () => {
  [redis, storage] = await Promise.all([startRedis(), startHttpStorage()]);
  gw = await startGateway(
    {
      storage: {
        clickhouse_url: storage.url,
        encryption_key: randomBytes(32).toString('base64'),
        key_poll_interval_ms: 60_000,
      },
      coordination: { redis_url: redis.url, timeout_ms: 500 },
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
  await Promise.all([redis?.stop(), storage?.stop()]);
}, 60_000);

describe('an attacker holding the fleet Redis', () => {
  it('cannot lock the admin out of /v2 by emptying every bucket', async () => {
    const statuses: number[] = [];
    for (let round = 0; round < 30; round++) {
      const ks = ((await attacker.sendCommand(['KEYS', '*'])) as string[]).filter((k) => k.includes(':b:'));
      for (const b of ks) {
        if (b.endsWith(':l')) continue;
        await attacker.hSet(b, { tok: '0', ts: String(Date.now() + 3_600_000) }).catch(() => {});
      }
      const rs = await Promise.all(
        Array.from({ length: 5 }, () => fetch(`${gw.managementUrl}/v2/api-keys`, { headers: bearer(admin) })),
      );
      for (const r of rs) {
        await r.arrayBuffer();
        statuses.push(r.status);
      }
    }
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
  }, 90_000);

  it('still limits a key holding keys:write at its own policy, whatever Redis holds (HSET tok 1e12)', async () => {
    const made = await fetch(`${gw.managementUrl}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(admin), 'content-type': 'application/json' },
      body: JSON.stringify({
        label: 'second admin',
        environment: 'production',
        scopes: ['keys:read', 'keys:write'],
        rate_limit: { limit: 5, burst: 5, window: 'day' },
      }),
    });
    expect(made.status, await made.clone().text()).toBe(201);
    const secret = ((await made.json()) as { secret: string }).secret;
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const ks = ((await attacker.sendCommand(['KEYS', '*'])) as string[]).filter((k) => k.includes(':b:'));
      for (const b of ks) if (!b.endsWith(':l')) await attacker.hSet(b, 'tok', '1e12').catch(() => {});
      const r = await fetch(`${gw.managementUrl}/v2/api-keys`, { headers: bearer(secret) });
      await r.arrayBuffer();
      statuses.push(r.status);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(7);
  }, 60_000);
});
