import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

/**
 * An upgrade whose client goes away while a fleet's bucket decision waits on Redis:
 * nothing goes to the origin once the decision comes, and its wake is written (499),
 * as a plain request's is. It was never written: the exchange stayed open for good,
 * and a stop waited for it.
 */
let redis: TestRedis;
let storage: HttpStorage;
let origin: http.Server;
let upgrades = 0;
let t: TestGateway;

beforeAll(async () => {
  [redis, storage] = await Promise.all([startRedis(), startHttpStorage()]);
  origin = http.createServer((_req, res) => res.end('ok'));
  origin.on('upgrade', (_req, socket) => {
    upgrades++;
    // Answers, then echoes.
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    socket.pipe(socket);
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  const port = (origin.address() as net.AddressInfo).port;
  t = await startGateway({
    storage: { clickhouse_url: storage.url },
    coordination: { redis_url: redis.url, timeout_ms: 5000 },
    routes: [
      {
        name: 'ws',
        prefix: '/ws',
        auth: 'none',
        upgrades: ['websocket'],
        origins: { production: `http://127.0.0.1:${port}` },
      },
    ],
  });
});
afterAll(async () => {
  await t?.cleanup();
  await new Promise((r) => origin?.close(r));
  await Promise.all([redis?.stop(), storage?.stop()]);
});

describe('an upgrade whose client leaves while the decision waits on Redis', () => {
  it('is recorded 499 and never reaches the origin', async () => {
    const sleeping = redis.cli('DEBUG', 'SLEEP', '1');
    await new Promise((r) => setTimeout(r, 50));
    const s = net.connect(Number(new URL(t.url).port), '127.0.0.1');
    await new Promise<void>((r) => s.once('connect', () => r()));
    s.write(
      'GET /ws/chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await new Promise((r) => setTimeout(r, 150));
    s.destroy();
    await sleeping;
    let found = 0;
    for (let i = 0; i < 100 && found === 0; i++) {
      await flushed(t.gw);
      const page = await call(t.url, t.admin, 'GET', '/v2/wakes?route=ws&status=499');
      found = (page.body.data as unknown[]).length;
      if (found === 0) await new Promise((r) => setTimeout(r, 50));
    }
    expect(found).toBe(1);
    expect(upgrades).toBe(0);
  }, 60_000);

  it('a client that stays is tunnelled once the decision comes, bytes it sent early included', async () => {
    const before = upgrades;
    const sleeping = redis.cli('DEBUG', 'SLEEP', '1');
    await new Promise((r) => setTimeout(r, 50));
    const s = net.connect(Number(new URL(t.url).port), '127.0.0.1');
    await new Promise<void>((r) => s.once('connect', () => r()));
    let got = '';
    s.on('data', (c: Buffer) => {
      got += c.toString('latin1');
    });
    s.write(
      'GET /ws/chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await new Promise((r) => setTimeout(r, 150));
    // Sent while the decision still waits: held, then tunnelled.
    s.write('early-bytes');
    await sleeping;
    for (let i = 0; i < 100 && !got.includes('early-bytes'); i++) await new Promise((r) => setTimeout(r, 20));
    expect(got).toMatch(/^HTTP\/1\.1 101/);
    expect(got).toContain('early-bytes');
    s.write('later');
    for (let i = 0; i < 100 && !got.includes('later'); i++) await new Promise((r) => setTimeout(r, 20));
    expect(got).toContain('later');
    expect(upgrades).toBe(before + 1);
    s.destroy();
  }, 60_000);
});
