// Regression tests from a review of the management listener's HTTP/2 (2026-11-28).
import http2, { type ClientHttp2Session } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { F, frame, hpack, RawH2, rstStream, T } from '../helpers/h2-frames.js';

const C = http2.constants;
const LIMIT = 10;

/**
 * The review's item: rapid reset (CVE-2023-44487) on the management listener's HTTP/2.
 * The main listener counts the streams a client resets per session against
 * server.http2_limits.max_resets_per_10s and sends GOAWAY (ENHANCE_YOUR_CALM) past it,
 * counted in wakegate_h2_goaway_total{reason="rapid_reset"}; the management listener
 * (Node's compatibility layer) counted nothing and served on. A separate management
 * listener with TLS (h2 by ALPN), a small limit, loopback only, bounded counts.
 */
describe('the management listener over HTTP/2: rapid reset', () => {
  let certs: TestCerts;
  let t: TestGateway;
  let port: number;
  const sessions: ClientHttp2Session[] = [];

  beforeAll(async () => {
    certs = makeCerts();
    t = await startGateway({
      server: {
        http2_limits: { max_concurrent_streams: 100, max_header_list_bytes: 65_536, max_resets_per_10s: LIMIT },
        api_body_limit_bytes: 1024,
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
    for (const s of sessions) s.destroy();
    await t?.cleanup();
    certs?.cleanup();
  });

  const connect = () =>
    new Promise<ClientHttp2Session>((resolve, reject) => {
      const c = http2.connect(`https://localhost:${port}`, { ca: certs.caPem });
      sessions.push(c);
      c.on('error', () => {});
      c.once('connect', () => resolve(c));
      c.once('error', reject);
    });

  /** wakegate_h2_goaway_total{reason="rapid_reset"} as the ops listener's /metrics says it. */
  const rapidResets = async () => {
    const metrics = await (await fetch(`${t.opsUrl}/metrics`)).text();
    return Number(/wakegate_h2_goaway_total\{reason="rapid_reset"\} (\d+)/.exec(metrics)?.[1] ?? 0);
  };

  /** A GET /v2/api-keys on `s`, its status. */
  const status = (s: ClientHttp2Session) =>
    new Promise<number>((resolve, reject) => {
      const r = s.request({ ':method': 'GET', ':path': '/v2/api-keys', ...bearer(t.admin) });
      r.on('response', (h) => resolve(Number(h[':status'])));
      r.on('error', reject);
      r.resume();
      r.end();
    });

  const within = <V>(p: Promise<V>, ms: number, fallback: V) => {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([p, new Promise<V>((r) => (timer = setTimeout(() => r(fallback), ms)))]).finally(() =>
      clearTimeout(timer),
    );
  };

  it('streams the client cancels past max_resets_per_10s get the session GOAWAY ENHANCE_YOUR_CALM, counted', async () => {
    const before = await rapidResets();
    const s = await connect();
    expect(s.alpnProtocol).toBe('h2');
    const goaway = new Promise<number>((r) => s.once('goaway', (code: number) => r(code)));
    // A few rounds of streams opened and cancelled at once, bounded: 4 x LIMIT in all.
    for (let round = 0; round < 4 && !s.closed && !s.destroyed; round++) {
      for (let i = 0; i < LIMIT; i++) {
        const r = s.request({ ':method': 'GET', ':path': '/v2/api-keys', ...bearer(t.admin) });
        r.on('error', () => {});
        r.close(C.NGHTTP2_CANCEL);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await within(goaway, 5000, -1)).toBe(C.NGHTTP2_ENHANCE_YOUR_CALM);
    expect(await rapidResets()).toBe(before + 1);
    // Another session is served.
    expect(await status(await connect())).toBe(200);
  });

  it('the same with HEADERS and RST_STREAM in one write (streams reset before they are served)', async () => {
    const before = await rapidResets();
    const c = await RawH2.connectTls(port, certs.caPem);
    const fields = hpack([
      [':method', 'GET'],
      [':scheme', 'https'],
      [':authority', `localhost:${port}`],
      [':path', '/v2/api-keys'],
    ]);
    let id = 1;
    for (let round = 0; round < 4 && !c.closed; round++) {
      const burst: Buffer[] = [];
      for (let i = 0; i < LIMIT; i++, id += 2) {
        burst.push(frame(T.HEADERS, F.END_STREAM | F.END_HEADERS, id, fields), rstStream(id, C.NGHTTP2_CANCEL));
      }
      c.write(Buffer.concat(burst));
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await c.closedWithin(5000)).toBe(true);
    expect(c.goawayCode()).toBe(C.NGHTTP2_ENHANCE_YOUR_CALM);
    expect(await rapidResets()).toBe(before + 1);
  });

  it('streams answered whole are no resets: more requests than the limit on one session are all served', async () => {
    const before = await rapidResets();
    const s = await connect();
    for (let i = 0; i < 3 * LIMIT; i++) expect(await status(s)).toBe(200);
    expect(s.closed || s.destroyed).toBe(false);
    expect(await rapidResets()).toBe(before);
  });

  it("streams the gateway itself ends (a /v2 body past its limit, refused 413 and cut) are no client's resets", async () => {
    const before = await rapidResets();
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    const s = await connect();
    /** A POST /v2/api-keys whose body is past api_body_limit_bytes: its status. */
    const tooLarge = () =>
      new Promise<number>((resolve) => {
        const r = s.request({
          ':method': 'POST',
          ':path': '/v2/api-keys',
          'content-type': 'application/json',
          ...bearer(t.admin),
        });
        let st = 0;
        r.on('response', (h) => {
          st = Number(h[':status']);
        });
        r.on('error', () => {});
        r.on('close', () => resolve(st));
        r.resume();
        r.write(Buffer.alloc(200_000, 'a'));
        r.end();
      });
    for (let i = 0; i < 3 * LIMIT; i++) expect(await tooLarge()).toBe(413);
    expect(s.closed || s.destroyed).toBe(false);
    expect(await status(s)).toBe(200);
    expect(await rapidResets()).toBe(before);
    process.off('warning', onWarning);
    // No `Connection` field on an HTTP/2 answer (Node's compatibility layer warned of it on stderr).
    expect(warnings).toEqual([]);
  });
});
