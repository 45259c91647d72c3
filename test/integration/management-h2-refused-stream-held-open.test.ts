// Regression tests from a review of the HTTP/2 edge (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { F, frame, hpack, RawH2, T } from '../helpers/h2-frames.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * docs/security.md: the ops and management listeners "hold each stream to the same rules
 * before it is served: ... a request body must be whole within `request_timeout_ms`, and a
 * session with no stream open is closed after `keep_alive_timeout_ms`". A stream console.ts
 * refuses through guards.ts answer() (400 malformed, 431) gets no request timer, no
 * RST_STREAM after its answer, and is not counted as open; a client that drips DATA on it
 * keeps the session (and its max_connections place) without end.
 */
describe('the management listener over HTTP/2: a refused stream whose client keeps sending DATA', () => {
  let certs: TestCerts;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    certs = makeCerts();
    t = await startGateway({
      server: { keep_alive_timeout_ms: 500, headers_timeout_ms: 1000, request_timeout_ms: 1000 },
      management: {
        listener: 'separate',
        host: '127.0.0.1',
        port: 0,
        on_main: true,
        tls: { certificates: [{ cert: certs.server.cert, key: certs.server.key }] },
      },
    });
    port = Number(new URL(t.managementUrl).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    certs?.cleanup();
  });

  it('is ended (RST_STREAM or the session closed) within a few request_timeout_ms, not held open', async () => {
    const c = await RawH2.connectTls(port, certs.caPem);
    c.write(frame(T.SETTINGS, 1, 0));
    const fields: [string, string][] = [
      [':method', 'BREW'],
      [':scheme', 'https'],
      [':authority', `localhost:${port}`],
      [':path', '/v2/api-keys'],
    ];
    c.write(frame(T.HEADERS, F.END_HEADERS, 1, hpack(fields)));
    const timer = setInterval(() => c.write(frame(T.DATA, 0, 1, Buffer.from('a'))), 250);
    const until = Date.now() + 4000;
    while (Date.now() < until && !c.closed && !c.frames.some((f) => f.stream === 1 && f.type === T.RST_STREAM))
      await sleep(50);
    clearInterval(timer);
    const answered = c.frames.some((f) => f.stream === 1 && f.type === T.HEADERS);
    const ended = c.closed || c.frames.some((f) => f.stream === 1 && f.type === T.RST_STREAM);
    c.destroy();
    expect(answered, 'the guard answered 400').toBe(true);
    // Observed: after 4 s (4x request_timeout_ms, 8x keep_alive_timeout_ms) the stream and session are still open.
    expect(ended).toBe(true);
  });
});
