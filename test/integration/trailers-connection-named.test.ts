// Regression tests from a review of the 2026-11-28 session's changes (each failed before its fix).
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2once } from '../helpers/h2.js';
import { rawExchange } from '../helpers/raw.js';

// 2a5381d says an origin's trailer fields are "filtered as its head's are". The head drops
// every field its Connection field names (headers.ts connectionTokens), and RFC 9110 §7.6.1
// has an intermediary remove "any header or trailer field(s)" so named. responseTrailerPairs
// never looks at the head's Connection: a field the origin marked hop-by-hop (here
// x-internal-token) is dropped from the head yet reaches the client as a trailer, over
// HTTP/1.1 and HTTP/2 alike.
describe('a trailer field the origin’s Connection field names', () => {
  let origin: net.Server;
  let t: TestGateway;
  let port: number;
  beforeAll(async () => {
    origin = net.createServer((s) => {
      let got = '';
      s.on('data', (c) => {
        got += c.toString('latin1');
        if (!got.includes('\r\n\r\n')) return;
        got = '';
        s.write(
          'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: keep-alive, x-internal-token\r\n' +
            'X-Internal-Token: head-secret\r\nTransfer-Encoding: chunked\r\n\r\n' +
            '5\r\nhello\r\n0\r\nX-Internal-Token: trailer-secret\r\nX-Checksum: abc\r\n\r\n',
        );
      });
      s.on('error', () => {});
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [{ name: 'o', prefix: '/o', auth: 'none', origins: { production: url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await new Promise<void>((r) => origin?.close(() => r()));
  });

  it('is dropped from an HTTP/1.1 client’s trailer section, as it is from the head', async () => {
    const r = await rawExchange(port, 'GET /o/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    const [head, rest = ''] = r.text.split('\r\n\r\n');
    expect(head?.toLowerCase()).not.toContain('x-internal-token');
    const trailer = rest.slice(rest.lastIndexOf('\r\n0\r\n') + 5).toLowerCase();
    expect(trailer).toContain('x-checksum: abc');
    expect(trailer).not.toContain('x-internal-token');
  });

  it('is dropped from an HTTP/2 client’s trailers, as it is from the head', async () => {
    const r = await h2once(t.url, { ':path': '/o/x' });
    expect(r.text).toBe('hello');
    expect(r.headers['x-internal-token']).toBeUndefined();
    expect(r.trailers['x-checksum']).toBe('abc');
    expect(r.trailers['x-internal-token']).toBeUndefined();
  });
});
