import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

describe('hostile HTTP', () => {
  let origin: TestServer;
  let hits = 0;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      hits++;
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      server: { headers_timeout_ms: 400, request_timeout_ms: 1500, max_header_bytes: 8192, api_body_limit_bytes: 2048 },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('cuts off a slowloris client that never finishes its headers', async () => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.resume();
    s.write('GET /open/x HTTP/1.1\r\nHost: a\r\n');
    const t0 = Date.now();
    const drip = setInterval(() => s.writable && s.write('X-Slow: 1\r\n'), 100);
    await new Promise<void>((r) => s.on('close', () => r()));
    clearInterval(drip);
    expect(Date.now() - t0).toBeLessThan(2500);
    expect(hits).toBe(0);
  });

  it('answers oversized headers with 431', async () => {
    const r = await rawExchange(port, `GET /open/x HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(10_000)}\r\n\r\n`);
    expect(statusOf(r.text)).toBe(431);
    expect(r.text).toContain('request_header_fields_too_large');
  });

  it('refuses, and never forwards, a request with both Content-Length and Transfer-Encoding', async () => {
    const before = hits;
    const r = await rawExchange(
      port,
      'POST /open/smuggle HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /open/hidden HTTP/1.1\r\nHost: a\r\n\r\n',
    );
    expect(statusOf(r.text)).toBe(400);
    expect(hits).toBe(before);
  });

  it('answers a /v2 body over the limit with 413 payload_too_large', async () => {
    const r = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'x'.repeat(5000), environment: 'production', scopes: ['wakes:read'] }),
    });
    expect(r.status).toBe(413);
    expect((await r.json()).error.type).toBe('payload_too_large');
  });

  it('answers malformed JSON, a wrong content type and invalid UTF-8 with 400 invalid_request', async () => {
    const send = (body: string | Uint8Array, type: string) =>
      fetch(`${t.url}/v2/api-keys`, { method: 'POST', headers: { ...bearer(t.admin), 'content-type': type }, body });
    for (const [body, type] of [
      ['{"label":', 'application/json'],
      ['label=x', 'application/x-www-form-urlencoded'],
      ['{}', 'text/plain'],
      [new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 'application/json'],
    ] as [string | Uint8Array, string][]) {
      const r = await send(body, type);
      expect(r.status, type).toBe(400);
      expect((await r.json()).error.type).toBe('invalid_request');
    }
  });

  it('keeps serving others while a client holds a request open past request_timeout', async () => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.resume();
    s.write('POST /open/slowbody HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\nabc');
    const t0 = Date.now();
    const r = await fetch(`${t.url}/open/other`);
    expect(r.status).toBe(200);
    await new Promise<void>((res) => s.on('close', () => res()));
    expect(Date.now() - t0).toBeLessThan(3000);
  });
});
