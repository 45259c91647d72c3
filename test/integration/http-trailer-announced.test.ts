// Regression tests from a review of HTTP semantics (2026-11-27).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange } from '../helpers/raw.js';
import { route, type Scripted, scripted } from '../helpers/scripted-origin.js';

/**
 * An origin's `Trailer` field (RFC 9110 §6.6.2) on an answer the gateway cannot send
 * chunked to its HTTP/1.x client: a HEAD's answer, a 204 or 304 (no content, RFC 9110
 * §6.4.1, §15.3.5, §15.4.5), or any answer to an HTTP/1.0 client (RFC 9112 §7: no
 * chunked for HTTP/1.0). The gateway must relay the origin's answer (the Trailer field
 * dropped, since no trailer section can follow); it answers 502 instead, because
 * node:http refuses a Trailer header on a non-chunked message (ERR_HTTP_TRAILER_INVALID)
 * and that throw fails the exchange. The 502 keeps the origin's reason phrase, and for
 * 204/304 announces a 183-byte JSON body it never sends on a kept connection, so a
 * keep-alive client waits for (or takes the next answer as) that body.
 */
describe('an origin answer announcing trailers, relayed where no trailers can follow', () => {
  let t: TestGateway;
  let o: Scripted;
  let node: TestServer;
  let port: number;

  beforeAll(async () => {
    // As Go's net/http writes them: the declared Trailer goes out whatever the method or status.
    o = await scripted((head, _c, _n, s) => {
      const path = head.split(' ')[1] as string;
      if (path.endsWith('/head'))
        s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: Server-Timing\r\n\r\n');
      else if (path.endsWith('/nc')) s.write('HTTP/1.1 204 No Content\r\nTrailer: Server-Timing\r\n\r\n');
      else if (path.endsWith('/nm'))
        s.write('HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\nTrailer: Server-Timing\r\n\r\n');
      else s.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext');
    });
    // A Node origin sending trailer fields as Node documents it (Trailer header, then addTrailers).
    node = await startServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain', trailer: 'server-timing' });
      res.write('hello');
      res.addTrailers({ 'server-timing': 'db;dur=53' });
      res.end();
    });
    t = await startGateway({ routes: [route('o', o.url), route('n', node.url)] });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await o?.close();
    await node?.close();
  });

  it('HEAD: the 200 is relayed, not a 502', async () => {
    const r = await rawExchange(port, 'HEAD /o/head HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(r.text.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
  });

  it('204 and 304: relayed as such; never a 502 that announces a body it does not send on a kept connection', async () => {
    // Two requests on one keep-alive connection: the first answer must frame correctly for the second to be read.
    for (const p of ['nc', 'nm']) {
      const r = await rawExchange(
        port,
        `GET /o/${p} HTTP/1.1\r\nHost: x\r\n\r\nGET /o/next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      );
      const first = r.text.split('\r\n')[0];
      expect(first).toBe(p === 'nc' ? 'HTTP/1.1 204 No Content' : 'HTTP/1.1 304 Not Modified');
      // Whatever the first answer is, its head must not promise body bytes that never come.
      const head = r.text.slice(0, r.text.indexOf('\r\n\r\n'));
      const announced = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      const after = r.text.slice(r.text.indexOf('\r\n\r\n') + 4);
      expect(after.startsWith('HTTP/1.1 200 OK') && announced !== 0).toBe(false);
    }
  });

  it('an HTTP/1.0 client gets the body of a chunked answer that announced trailers, not a 502', async () => {
    const r = await rawExchange(port, 'GET /n/x HTTP/1.0\r\nHost: x\r\n\r\n');
    expect(r.text.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
    expect(r.text.endsWith('\r\n\r\nhello')).toBe(true);
    // The wake says what the origin answered.
    await flushed(t.gw);
    const w = await fetch(`${t.url}/v2/wakes?path=/n/x`, { headers: { authorization: `Bearer ${t.admin}` } });
    const body = (await w.json()) as { data: { status: number }[] };
    expect(body.data[0]?.status).toBe(200);
  });
});
