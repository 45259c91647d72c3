import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/** Issue #26, items 13 and 14: what the origin sends reaches the client, or the refusal names the setting. */
describe('fidelity', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      if (req.url?.startsWith('/a/trailers')) {
        res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum, grpc-status' });
        res.write('part one, ');
        res.addTrailers({ 'x-checksum': 'abc123', 'grpc-status': '0' });
        res.end('part two');
        return;
      }
      if (req.url?.startsWith('/a/upload')) {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ body: Buffer.concat(chunks).toString(), trailers: req.trailers }));
        });
        return;
      }
      if (req.url?.includes('/big-header')) {
        res.writeHead(200, { 'x-big': 'b'.repeat(20_000) });
        res.end('ok');
        return;
      }
      res.end('plain');
    });
    t = await startGateway({
      routes: [
        { name: 'a', prefix: '/a', auth: 'none', origins: { production: origin.url } },
        {
          name: 'wide',
          prefix: '/wide',
          auth: 'none',
          max_response_header_bytes: 65_536,
          origins: { production: origin.url },
        },
      ],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const get = (path: string) =>
    new Promise<{
      status: number;
      body: string;
      trailers: Record<string, string | undefined>;
      headers: http.IncomingHttpHeaders;
    }>((resolve, reject) => {
      http
        .get(`${t.url}${path}`, { maxHeaderSize: 65_536 }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            body += c;
          });
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body, trailers: res.trailers, headers: res.headers }),
          );
        })
        .on('error', reject);
    });

  it('13. passes the trailer fields of a chunked answer through, with its Trailer header', async () => {
    const r = await get('/a/trailers');
    expect(r.status).toBe(200);
    expect(r.body).toBe('part one, part two');
    expect(r.headers.trailer).toBe('x-checksum, grpc-status');
    expect(r.trailers).toMatchObject({ 'x-checksum': 'abc123', 'grpc-status': '0' });
  });

  it('13. passes the trailer fields a client sends after a chunked body through to the origin', async () => {
    const r = await rawExchange(
      Number(new URL(t.url).port),
      'POST /a/upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: x-digest\r\nConnection: close\r\n\r\n' +
        '5\r\nhello\r\n6\r\n world\r\n0\r\nx-digest: sha-256=abc\r\n\r\n',
    );
    expect(statusOf(r.text)).toBe(200);
    const body = JSON.parse(r.text.slice(r.text.indexOf('{'), r.text.lastIndexOf('}') + 1)) as {
      body: string;
      trailers: Record<string, string>;
    };
    expect(body).toEqual({ body: 'hello world', trailers: { 'x-digest': 'sha-256=abc' } });
  });

  it('14. an origin header block over the limit is a 502 naming routes[].max_response_header_bytes; a route may raise it', async () => {
    const r = await get('/a/big-header');
    expect(r.status).toBe(502);
    const e = JSON.parse(r.body) as { error: { type: string; message: string } };
    expect(e.error.type).toBe('upstream_unavailable');
    expect(e.error.message).toContain('routes[].max_response_header_bytes (16384 bytes)');
    const wide = await get('/wide/big-header');
    expect(wide.status).toBe(200);
    expect(wide.headers['x-big']).toHaveLength(20_000);
  });
});
