import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Heartbeat, INSTANCES_FILE } from '../../src/fleet/alive.js';
import { Coordinator } from '../../src/fleet/redis.js';
import { createLogger } from '../../src/log.js';
import { createMetrics, registerCoordination } from '../../src/metrics/index.js';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

/**
 * A fleet gateway that starts while Redis is away (on_unavailable: local) splits each
 * bucket by the fleet's last count, which its data directory remembers, not by 1: a
 * fleet of N restarting during an outage would otherwise admit N buckets' worth.
 */
let redis: TestRedis;
let storage: HttpStorage;
let origin: TestServer;
const others: { co: Coordinator; beat: Heartbeat }[] = [];
const gateways: TestGateway[] = [];

beforeAll(async () => {
  [redis, storage, origin] = await Promise.all([
    startRedis(),
    startHttpStorage(),
    startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    }),
  ]);
});
afterAll(async () => {
  for (const g of gateways) await g.cleanup();
  for (const o of others) await o.co.close();
  await Promise.all([redis?.stop(), storage?.stop(), origin?.close()]);
});

const values = () => ({
  storage: { clickhouse_url: storage.url },
  coordination: { redis_url: redis.url, timeout_ms: 300, on_unavailable: 'local' },
  routes: [
    {
      name: 'api',
      prefix: '/api',
      scopes: { read: 'api:read', write: 'api:write' },
      origins: { production: origin.url },
    },
  ],
});
const readyz = async (t: TestGateway) =>
  (await (await fetch(`${t.opsUrl}/readyz`)).json()) as { coordination: { instances: number; redis: string } };
const remembered = (dir: string) => {
  try {
    return Number(readFileSync(join(dir, INSTANCES_FILE), 'utf8'));
  } catch {
    return 0;
  }
};

describe('a fleet gateway started while Redis is away', () => {
  it("splits buckets by the fleet's last count, remembered in DATA_DIR", async () => {
    const first = await startGateway(values());
    gateways.push(first);
    // Two more instances of the fleet, beating as gateways do.
    for (let i = 0; i < 2; i++) {
      const metrics = createMetrics({ process: false });
      registerCoordination(metrics);
      const co = new Coordinator({ url: redis.url, timeoutMs: 1000, log: createLogger('silent'), metrics });
      await co.start();
      const beat = new Heartbeat(co);
      await beat.beat();
      others.push({ co, beat });
    }
    // The gateway's heartbeat (every 3 s) hears three, and its data directory keeps the count.
    for (let i = 0; i < 100 && remembered(first.dir) !== 3; i++) await new Promise((r) => setTimeout(r, 100));
    expect(remembered(first.dir)).toBe(3);
    const k = await call(first.url, first.admin, 'POST', '/v2/api-keys', {
      label: 'outage',
      environment: 'production',
      scopes: ['api:read'],
      rate_limit: { limit: 9, burst: 9, window: 'day' },
    });
    expect(k.status).toBe(201);
    await first.stop();

    // Redis goes away, and the gateway starts again on its data directory.
    await redis.stop();
    const again = await startGateway(values(), { dir: first.dir, admin: first.admin });
    // The directory is this one's now: removed once, after it stops.
    gateways.splice(gateways.indexOf(first), 1, again);
    expect((await readyz(again)).coordination).toMatchObject({ redis: 'down', instances: 3 });
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) {
      statuses.push((await fetch(`${again.url}/api/x`, { headers: bearer(k.body.secret as string) })).status);
    }
    // Its share is a third of the bucket of 9, not the whole of it.
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(6);
    await redis.start();
  }, 60_000);
});
