// Regression tests from a review of the HTTP/2 edge (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { F, frame, hpack, RawH2, request, T } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * docs/configuration.md (HTTP/2): "Every HTTP/1.1 budget holds per stream (bodies,
 * `request_timeout_ms`, ...); an idle session (no stream open) is closed after
 * `keep_alive_timeout_ms`"; security.md: "request bodies must be whole within
 * request_timeout_ms, per stream". A stream the edge answers itself before the proxy
 * (guards.ts answer(): a malformed :method, Host against :authority, userinfo, a header list
 * past max_header_list_bytes) is answered but its request side is left open and read
 * forever: no request_timeout_ms timer, no RST_STREAM NO_ERROR after the answer (RFC 9113
 * §8.1), and it is not counted as open, so the session's idle close never applies either
 * (each DATA frame refreshes Node's timer). One DATA byte every 300 ms holds the connection
 * (a max_connections place) without end; over HTTP/1.1 the same request is answered 400 and
 * its connection closed. A proxied stream under the same drip is reset at request_timeout_ms.
 */
describe('HTTP/2: a stream refused by the edge whose client keeps sending DATA', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      server: { http2: 'h2c', request_timeout_ms: 1000, headers_timeout_ms: 500, keep_alive_timeout_ms: 1000 },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  /** Opens stream 1 with `fields` (no END_STREAM), drips a DATA byte every 300 ms for `ms`: was it reset, or the session closed? */
  const drip = async (fields: [string, string][], ms: number) => {
    const c = await RawH2.connect(port);
    c.write(frame(T.SETTINGS, 1, 0));
    c.write(frame(T.HEADERS, F.END_HEADERS, 1, hpack(fields)));
    const timer = setInterval(() => c.write(frame(T.DATA, 0, 1, Buffer.from('a'))), 300);
    const until = Date.now() + ms;
    while (Date.now() < until && !c.closed && !c.frames.some((f) => f.stream === 1 && f.type === T.RST_STREAM))
      await sleep(50);
    clearInterval(timer);
    const status = c.frames.some((f) => f.stream === 1 && f.type === T.HEADERS);
    const ended = { reset: c.frames.some((f) => f.stream === 1 && f.type === T.RST_STREAM), closed: c.closed, status };
    c.destroy();
    return ended;
  };

  it('control: a proxied stream under the same drip is reset at request_timeout_ms', async () => {
    const r = await drip([...request('/open/up', 'POST'), ['content-length', '100000']], 4000);
    expect(r.reset || r.closed).toBe(true);
  });

  it.each([
    ['a :method HTTP/1.1 does not take (400)', [...request('/open/up', 'BREW'), ['content-length', '100000']]],
    ['a Host naming another authority (400)', [...request('/open/up', 'POST'), ['host', 'other.example']]],
    [
      'userinfo in :authority (400)',
      [
        [':method', 'POST'],
        [':scheme', 'http'],
        [':authority', 'u:p@localhost'],
        [':path', '/open/up'],
      ] as [string, string][],
    ],
  ])('%s: the stream is ended within request_timeout_ms plus a margin, not held open', async (_name, fields) => {
    const r = await drip(fields as [string, string][], 4000);
    expect(r.status, 'the edge answered the stream').toBe(true);
    // Observed: after 4 s (4x request_timeout_ms, 4x keep_alive_timeout_ms) neither RST_STREAM nor a closed connection.
    expect(r.reset || r.closed).toBe(true);
  });
});
