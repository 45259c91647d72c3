// Regression tests from a review of HTTP/2 trailers (2026-11-28).
import type { OutgoingHttpHeaders } from 'node:http2';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { type H2Answer, h2connect, h2request } from '../helpers/h2.js';
import { F, frame, hpack, RawH2, request, T } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/** server.buffer_request_body_bytes of the gateway under test: bodies past it stream to the origin. */
const BUFFER = 16_384;

/**
 * An HTTP/2 client's request trailers (a HEADERS frame after its DATA, RFC 9113 §8.1) are
 * forwarded, filtered and refused exactly as an HTTP/1.1 client's chunked trailer section
 * is through the same gateway (request-trailers.test.ts has the HTTP/1.1 side's rules).
 */
describe('HTTP/2: request trailers, as HTTP/1.1 has them', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  /** What the origin received: each request's body length, trailers, and every raw line. */
  let seen: { bytes: number; trailers: Record<string, string | undefined>; raw: string }[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        seen.push({
          bytes: body.length,
          trailers: { ...req.trailers },
          raw: [...req.rawHeaders, ...req.rawTrailers].join('\n'),
        });
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
        res.end('ok');
      });
    });
    t = await startGateway({
      server: { http2: 'h2c', buffer_request_body_bytes: BUFFER },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });
  beforeEach(() => {
    seen = [];
  });

  /** A POST of `body` with `trailers` after it, on its own h2c session. */
  const h2post = async (body: Buffer | string, trailers: OutgoingHttpHeaders): Promise<H2Answer> => {
    const s = await h2connect(t.url);
    try {
      return await h2request(s, { ':path': '/open/upload', ':method': 'POST' }, body, trailers);
    } finally {
      s.close();
    }
  };

  /** The same on HTTP/1.1: chunked, with a trailer section after the last chunk. */
  const h1post = (body: string, trailers: [string, string][]) =>
    rawExchange(
      port,
      'POST /open/upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' +
        `${body.length > 0 ? `${body.length.toString(16)}\r\n${body}\r\n` : ''}0\r\n` +
        `${trailers.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`,
      10_000,
    );

  const FIELDS: [string, string][] = [
    ['x-checksum', 'sha-256=abc'],
    ['grpc-status', '0'],
    ['x-wakegate-consumer', 'billing-service'],
    ['x-wakegate-key-id', 'key_forged'],
    ['x-forwarded-for', '10.9.9.9'],
    ['forwarded', 'for=10.9.9.9'],
    ['authorization', 'Basic Zm9vOmJhcg=='],
    ['host', 'elsewhere.example'],
    ['content-type', 'text/evil'],
    ['traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'],
  ];

  it('the origin gets the same trailer fields from an HTTP/2 client as from an HTTP/1.1 one, the dropped ones dropped', async () => {
    const h1 = await h1post('hello', FIELDS);
    expect(statusOf(h1.text)).toBe(200);
    const h2 = await h2post('hello', Object.fromEntries(FIELDS));
    expect(h2.status).toBe(200);
    expect(seen).toHaveLength(2);
    expect(seen[0]?.trailers).toEqual({ 'x-checksum': 'sha-256=abc', 'grpc-status': '0' });
    expect(seen[1]?.trailers).toEqual(seen[0]?.trailers);
    expect(seen[1]?.bytes).toBe(5);
    for (const s of seen) {
      expect(s.raw).not.toContain('billing-service');
      expect(s.raw).not.toContain('key_forged');
      expect(s.raw).not.toContain('elsewhere.example');
      expect(s.raw).not.toContain('text/evil');
    }
  });

  it('a gateway key in an HTTP/2 trailer refuses the request as on HTTP/1.1 (400, param trailers); the origin gets nothing', async () => {
    const key = `svc_live_${newSecret()}`;
    const h1 = await h1post('hello', [['x-token', key]]);
    expect(statusOf(h1.text)).toBe(400);
    const h2 = await h2post('hello', { 'x-checksum': 'abc', 'x-token': key });
    expect(h2.status).toBe(400);
    expect(JSON.parse(h2.text).error).toMatchObject({ type: 'invalid_request', param: 'trailers' });
    expect(h2.text).not.toContain(key);
    expect(seen).toEqual([]);
  });

  it('trailers after an empty body (HEADERS, then HEADERS with END_STREAM) are forwarded as on HTTP/1.1', async () => {
    expect(statusOf((await h1post('', [['x-checksum', 'none']])).text)).toBe(200);
    expect(seen[0]?.trailers).toEqual({ 'x-checksum': 'none' });
    // Node's client sends no DATA frame for an empty body: the trailers follow the request's HEADERS.
    const raw = await RawH2.connect(port);
    try {
      raw.write(frame(T.HEADERS, F.END_HEADERS, 1, hpack(request('/open/upload', 'POST'))));
      raw.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, hpack([['x-checksum', 'none']])));
      const deadline = Date.now() + 3000;
      while (seen.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    } finally {
      raw.destroy();
    }
    expect(seen).toHaveLength(2);
    expect(seen[1]).toMatchObject({ bytes: 0, trailers: { 'x-checksum': 'none' } });
  });

  it('a body past buffer_request_body_bytes streams to the origin, and a key in its trailers refuses it on both protocols (400), reaching nowhere', async () => {
    const key = `svc_live_${newSecret()}`;
    const big = 'b'.repeat(BUFFER * 2);
    expect(statusOf((await h1post(big, [['x-token', key]])).text)).toBe(400);
    const h2 = await h2post(big, { 'x-token': key });
    expect(h2.status).toBe(400);
    expect(JSON.parse(h2.text).error).toMatchObject({ type: 'invalid_request', param: 'trailers' });
    // Neither request reached its end at the origin (streamed-request-trailers.test.ts has the rest).
    expect(seen).toEqual([]);
  });
});
