// Regression tests from a review of the HTTP/2 edge (2026-11-28).
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2once } from '../helpers/h2.js';
import { F, frame, hpack, RawH2, request, T } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const { NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;

/**
 * Until a client acknowledges the SETTINGS, Node decodes each of its header lists whole,
 * however large (HPACK lets a 2 kB frame decode to 8 MB): the first list past
 * max_header_list_bytes from such a client is answered 431, and its session is then sent
 * GOAWAY ENHANCE_YOUR_CALM (h2/guards.ts tooLarge), so it cannot ask for more.
 */
describe('HTTP/2: a header list past max_header_list_bytes before SETTINGS are acknowledged', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('is answered 431, then the session gets GOAWAY ENHANCE_YOUR_CALM; other clients are served', async () => {
    const c = await RawH2.connect(port); // the server's SETTINGS never acknowledged
    // 80 kB of fields: past the limit (65,536), within what Node takes before the ACK.
    const fields = request('/open/big');
    for (let i = 0; i < 10; i++) fields.push([`x-pad-${i}`, 'p'.repeat(8000)]);
    const big = hpack(fields);
    c.write(frame(T.HEADERS, F.END_STREAM, 1, big.subarray(0, 16_000)));
    for (let i = 16_000; i < big.length; i += 16_000) {
      const last = i + 16_000 >= big.length;
      c.write(frame(T.CONTINUATION, last ? F.END_HEADERS : 0, 1, big.subarray(i, i + 16_000)));
    }
    const until = Date.now() + 3000;
    const over = () =>
      c.frames.some((f) => f.stream === 1 && ((f.flags & F.END_STREAM) !== 0 || f.type === T.RST_STREAM));
    while (Date.now() < until && !(over() && c.goawayCode() !== null) && !c.closed)
      await new Promise((r) => setTimeout(r, 20));
    c.destroy();
    const body = Buffer.concat(c.frames.filter((f) => f.stream === 1 && f.type === T.DATA).map((f) => f.payload));
    expect(JSON.parse(body.toString()).error.type).toBe('request_header_fields_too_large');
    expect(c.goawayCode()).toBe(NGHTTP2_ENHANCE_YOUR_CALM);
    expect((await h2once(t.url, { ':path': '/open/after' })).status).toBe(200);
  });
});
