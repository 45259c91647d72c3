import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2connect, h2request } from '../helpers/h2.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * An origin status HTTP/1.1 allows (600-999) but HTTP/2 cannot carry (200-599 only):
 * an h2 client gets the gateway's 502 upstream_unavailable, on both ways a request goes
 * to the origin (undici; node:http for a request with trailers, where Node's throw from
 * the answer's HEADERS once escaped an event listener and ended the process). HTTP/1.1
 * relays the status as it is.
 */
describe('HTTP/2: an origin status HTTP/2 cannot carry', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const uncaught: Error[] = [];
  const onUncaught = (e: Error) => uncaught.push(e);

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const status = Number(/\/open\/(\d+)/.exec(req.url ?? '')?.[1] ?? 200);
        res.writeHead(status, { 'content-type': 'text/plain', trailer: 'x-t' });
        res.addTrailers({ 'x-t': '1' });
        res.end('odd');
      });
    });
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
    process.on('uncaughtException', onUncaught);
  });
  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    await t.cleanup();
    await origin.close();
  });

  /** One h2 POST (with request trailers or not): its answer, or a failure within 3 s. */
  const post = async (path: string, trailers?: Record<string, string>) => {
    const s = await h2connect(t.url);
    try {
      return await Promise.race([
        h2request(s, { ':path': path, ':method': 'POST' }, 'body', trailers),
        new Promise<never>((_, rej) => setTimeout(() => rej(new Error('no answer in 3s')), 3000)),
      ]);
    } finally {
      s.close();
    }
  };
  const expectGatewayError = (r: Awaited<ReturnType<typeof post>>, status: number) => {
    expect(r.status).toBe(502);
    expect(r.headers['content-type']).toBe('application/json; charset=utf-8');
    const body = JSON.parse(r.text);
    expect(body.error.type).toBe('upstream_unavailable');
    expect(body.error.message).toContain(`status ${status}`);
    expect(body.error.wake_id).toBe(r.headers['x-wake-id']);
    expect(r.trailers['x-t']).toBeUndefined();
  };

  for (const status of [600, 700, 999]) {
    it(`${status}, plain h2 POST (undici): 502 upstream_unavailable, nothing thrown`, async () => {
      expectGatewayError(await post(`/open/${status}`), status);
      expect(uncaught.map(String)).toEqual([]);
    });

    it(`${status}, h2 POST with request trailers (node:http): 502 upstream_unavailable, nothing thrown`, async () => {
      expectGatewayError(await post(`/open/${status}/t`, { 'x-sum': '1' }), status);
      await new Promise((r) => setTimeout(r, 100));
      expect(uncaught.map(String)).toEqual([]);
    });
  }

  it('the gateway serves on, and a status HTTP/2 carries passes as it is', async () => {
    const r = await post('/open/599/t', { 'x-sum': '1' });
    expect(r.status).toBe(599);
    expect(r.text).toBe('odd');
    expect((await post('/open/201')).status).toBe(201);
  });

  it('a GET (undici) too; its wake records 502 upstream_unavailable, not the status the client never got', async () => {
    const s = await h2connect(t.url);
    try {
      expectGatewayError(await h2request(s, { ':path': '/open/700/get' }), 700);
    } finally {
      s.close();
    }
    await flushed(t.gw);
    const page = await t.gw.wakes.list({ environment: 'production', pathPattern: '^/open/700/get$' }, 10, null);
    expect(page.rows.map((w) => w.status)).toEqual([502]);
  });

  it('HTTP/1.1 (a chunked body with trailers, and a plain one) relays the status as it is', async () => {
    for (const req of [
      'POST /open/700/h1 HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nTrailer: x-sum\r\nConnection: close\r\n\r\n4\r\nbody\r\n0\r\nx-sum: 1\r\n\r\n',
      'POST /open/700/h1 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody',
    ]) {
      const s = net.connect(port, '127.0.0.1');
      const got: Buffer[] = [];
      s.on('data', (b) => got.push(b));
      s.on('error', () => {});
      s.write(req);
      await new Promise((r) => s.once('close', r));
      expect(Buffer.concat(got).toString('latin1')).toMatch(/^HTTP\/1\.1 700/);
    }
    expect(uncaught.map(String)).toEqual([]);
  });
});
