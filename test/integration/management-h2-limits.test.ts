// Regression tests from a review of the management listener's HTTP/2 (2026-11-28).
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { F, frame, hpack, RawH2, settings, T } from '../helpers/h2-frames.js';
import { httpsGet } from '../helpers/tls-client.js';

const C = http2.constants;
const MAX_STREAMS = 4;
const MAX_HEADER_LIST = 4096;
/** A path the management listener answers 404 at once, whatever the request's body does. */
const ELSEWHERE = '/elsewhere';

/**
 * The review's item: the management listener's HTTP/2 (Node's compatibility layer) against
 * the rest of server.http2_limits, the idle and request timeouts, and frames that are no
 * HTTP/2. A separate management listener with TLS (h2 by ALPN), raw frames on loopback.
 */
describe('the management listener over HTTP/2: limits, timeouts, garbage', () => {
  let certs: TestCerts;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    certs = makeCerts();
    t = await startGateway({
      server: {
        keep_alive_timeout_ms: 500,
        headers_timeout_ms: 1000,
        request_timeout_ms: 1000,
        http2_limits: {
          max_concurrent_streams: MAX_STREAMS,
          max_header_list_bytes: MAX_HEADER_LIST,
          max_resets_per_10s: 200,
        },
      },
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

  const fields = (path: string, extra: [string, string][] = []): Buffer =>
    hpack([[':method', 'GET'], [':scheme', 'https'], [':authority', `localhost:${port}`], [':path', path], ...extra]);

  /** Waits (bounded) until `c` has a frame that `match` takes. */
  const frameOf = async (c: RawH2, match: (f: { type: number; flags: number; stream: number }) => boolean) => {
    const until = Date.now() + 3000;
    while (Date.now() < until && !c.frames.some(match)) await new Promise((r) => setTimeout(r, 20));
    return c.frames.find(match);
  };

  /** The listener still serves (over HTTP/1.1 and TLS): the process is up. */
  const stillServed = async () => {
    const r = await httpsGet(`https://localhost:${port}/v2/api-keys`, {
      ca: certs.caPem,
      headers: { authorization: `Bearer ${t.admin}` },
    });
    expect(r.status).toBe(200);
  };

  it('garbage after the preface, and bad SETTINGS, end that session only (GOAWAY, the socket closed)', async () => {
    const cases = [
      Buffer.from('\x00\x00\x05\xff\xff\x00\x00\x00\x01hello garbage that is no frame at all'.repeat(20), 'latin1'),
      frame(T.SETTINGS, 0, 0, Buffer.alloc(7)),
      settings([[0x4, 0x80000000]]),
      frame(T.SETTINGS, 0, 3, Buffer.alloc(0)),
    ];
    for (const bad of cases) {
      const c = await RawH2.connectTls(port, certs.caPem);
      c.write(bad);
      // GOAWAY with an error at once; the connection closed within keep_alive_timeout_ms.
      expect(await c.closedWithin(3000)).toBe(true);
      expect(c.goawayCode()).not.toBeNull();
      expect(c.goawayCode()).not.toBe(C.NGHTTP2_NO_ERROR);
    }
    await stillServed();
  });

  it('a header list past max_header_list_bytes, sent before SETTINGS are acknowledged, is 431 and not served', async () => {
    const c = await RawH2.connectTls(port, certs.caPem);
    c.write(
      frame(
        T.HEADERS,
        F.END_HEADERS | F.END_STREAM,
        1,
        fields('/v2/api-keys', [['x-pad', 'a'.repeat(MAX_HEADER_LIST)]]),
      ),
    );
    const head = await frameOf(c, (f) => f.stream === 1 && (f.type === T.HEADERS || f.type === T.RST_STREAM));
    c.destroy();
    expect(head?.type).toBe(T.HEADERS);
    const body = Buffer.concat(c.frames.filter((f) => f.stream === 1 && f.type === T.DATA).map((f) => f.payload));
    expect(JSON.parse(body.toString()).error).toMatchObject({ type: 'request_header_fields_too_large' });
  });

  it('streams past max_concurrent_streams are refused', async () => {
    const c = await RawH2.connectTls(port, certs.caPem);
    // Streams whose request never ends (no END_STREAM) stay open, answered or not: one more than the limit.
    const burst: Buffer[] = [];
    for (let i = 0; i <= MAX_STREAMS; i++) burst.push(frame(T.HEADERS, F.END_HEADERS, 1 + 2 * i, fields(ELSEWHERE)));
    c.write(Buffer.concat(burst));
    const last = 1 + 2 * MAX_STREAMS;
    const refused = await frameOf(c, (f) => f.stream === last && f.type === T.RST_STREAM);
    c.destroy();
    expect(refused?.payload.readUInt32BE(0)).toBe(C.NGHTTP2_REFUSED_STREAM);
  });

  it('a stream whose request never ends is reset at request_timeout_ms, and the idle session is then closed', async () => {
    const c = await RawH2.connectTls(port, certs.caPem);
    const t0 = Date.now();
    c.write(frame(T.HEADERS, F.END_HEADERS, 1, fields(ELSEWHERE)));
    c.write(frame(T.DATA, 0, 1, Buffer.from('part')));
    // Its answer comes (404 at once: this listener serves the console and /v2 only), then nothing more from the client.
    expect(await c.closedWithin(4000)).toBe(true);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    const rst = c.frames.find((f) => f.type === T.RST_STREAM && f.stream === 1);
    expect(rst?.payload.readUInt32BE(0)).toBe(C.NGHTTP2_CANCEL);
    await stillServed();
  });
});
