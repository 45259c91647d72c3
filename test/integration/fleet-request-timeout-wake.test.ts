// Regression test: a request timed out while its admission waited on Redis (2026-11-27).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `server.request_timeout_ms` running out while a request's admission still waits on
 * Redis for its bucket (a fleet's first decision of a bucket, Redis slow): the 408 is
 * the proxy's, with the wake's id, and the wake says 408. It was the edge's own 408
 * with `"wake_id": null`, and the wake, recorded when admission answered later, said
 * 499 (or the request was forwarded after its client had been answered).
 */
let redis: TestRedis;
let storage: HttpStorage;
let origin: TestServer;
let t: TestGateway;
const reached: string[] = [];

beforeAll(async () => {
  [redis, storage, origin] = await Promise.all([
    startRedis(),
    startHttpStorage(),
    startServer((req, res) => {
      reached.push(req.url ?? '');
      req.resume();
      req.on('end', () => res.end('ok'));
    }),
  ]);
  t = await startGateway({
    storage: { clickhouse_url: storage.url },
    server: { request_timeout_ms: 1000, headers_timeout_ms: 500 },
    coordination: { redis_url: redis.url, timeout_ms: 4000 },
    routes: [
      {
        name: 'api',
        prefix: '/api',
        scopes: { read: 'api:read', write: 'api:write' },
        origins: { production: origin.url },
      },
    ],
  });
}, 60_000);
afterAll(async () => {
  await t?.cleanup();
  await Promise.all([redis?.stop(), storage?.stop(), origin?.close()]);
});

describe('a request timed out while its admission waits on Redis', () => {
  it('is answered 408 with its wake id, its wake says 408, and it never reaches the origin', async () => {
    const k = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'slow-redis',
      environment: 'production',
      scopes: ['api:write'],
      rate_limit: { limit: 1000, burst: 1000, window: 'day' },
    });
    expect(k.status).toBe(201);
    const sleeping = redis.cli('DEBUG', 'SLEEP', '3');
    await sleep(100);
    const s = net.connect(Number(new URL(t.url).port), '127.0.0.1');
    s.on('error', () => {});
    let text = '';
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1');
    });
    const closed = new Promise((r) => s.on('close', r));
    s.write(
      `POST /api/slow HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${k.body.secret}\r\nContent-Length: 10\r\n\r\nabc`,
    );
    await Promise.race([closed, sleep(6000)]);
    s.destroy();
    await sleeping;
    expect(text.startsWith('HTTP/1.1 408'), text).toBe(true);
    const id = /x-wake-id: (\S+)/i.exec(text)?.[1];
    expect(id, text).toBeDefined();
    expect(text).toContain(`"wake_id":"${id}"`);
    await sleep(4500);
    await flushed(t.gw);
    const page = await t.gw.wakes.list({ environment: 'production', pathPattern: '^/api/slow$' }, 10, null);
    expect(page.rows.map((w) => [w.id, w.status])).toEqual([[id, 408]]);
    expect(reached).not.toContain('/api/slow');
  }, 30_000);
});
