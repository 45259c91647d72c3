// Regression tests from a review of the management listener's HTTP/2 (2026-11-28).
import http2, { type ClientHttp2Session, type OutgoingHttpHeaders } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { F, frame, hpack, RawH2, T } from '../helpers/h2-frames.js';

/**
 * The review's item: the ops and management listeners serve HTTP/2 (the console and /v2)
 * through Node's compatibility layer, which served a Host naming another authority than
 * `:authority` (malformed, RFC 9113 §8.3.1) and userinfo in either, where the main
 * listener's HTTP/2 refuses both (400, h2/edge.ts). A real node:http2 client on each
 * TLS listener (h2 by ALPN): the ops listener (server.ops_tls) and a separate management
 * listener (management.tls).
 */
/** Node 22 and later: nghttp2 refuses userinfo in :authority and host before the gateway sees the stream. */
const NGHTTP2_REFUSES = Number(process.versions.node.split('.')[0]) >= 22;

describe('the management listeners over HTTP/2: Host against :authority, userinfo', () => {
  let certs: TestCerts;
  let t: TestGateway;
  const sessions: ClientHttp2Session[] = [];

  beforeAll(async () => {
    certs = makeCerts();
    const tls = { certificates: [{ cert: certs.server.cert, key: certs.server.key }] };
    t = await startGateway({
      server: { ops_tls: tls },
      management: { listener: 'separate', host: '127.0.0.1', port: 0, on_main: true, tls },
    });
  });
  afterAll(async () => {
    for (const s of sessions) s.destroy();
    await t?.cleanup();
    certs?.cleanup();
  });

  const listeners = () => [
    { name: 'ops', port: Number(new URL(t.opsUrl).port), path: '/healthz' },
    { name: 'management', port: Number(new URL(t.managementUrl).port), path: '/v2/api-keys' },
  ];

  const connect = (port: number) =>
    new Promise<ClientHttp2Session>((resolve, reject) => {
      const c = http2.connect(`https://localhost:${port}`, { ca: certs.caPem });
      sessions.push(c);
      c.once('connect', () => resolve(c));
      c.once('error', reject);
    });

  /** One GET on `s`: its status and body. */
  const get = (s: ClientHttp2Session, headers: OutgoingHttpHeaders): Promise<{ status: number; text: string }> =>
    new Promise((resolve, reject) => {
      const r = s.request({ ':method': 'GET', ...bearer(t.admin), ...headers });
      let status = 0;
      const chunks: Buffer[] = [];
      r.on('response', (h) => {
        status = Number(h[':status']);
      });
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => resolve({ status, text: Buffer.concat(chunks).toString() }));
      r.on('error', reject);
      r.end();
    });

  it('a Host naming another authority than :authority is malformed: 400, not served', async () => {
    for (const l of listeners()) {
      const s = await connect(l.port);
      expect(s.alpnProtocol, l.name).toBe('h2');
      const r = await get(s, { ':path': l.path, ':authority': `localhost:${l.port}`, host: 'evil.example' });
      expect(r.status, `${l.name}: ${r.text}`).toBe(400);
      expect(JSON.parse(r.text).error, l.name).toMatchObject({ type: 'invalid_request', retry_after: null });
      expect(JSON.parse(r.text).error.message, l.name).toBe('malformed request');
      // The console too (a page that would otherwise be served with its Host-derived links).
      const c = await get(s, { ':path': '/console/', ':authority': `localhost:${l.port}`, host: 'evil.example' });
      expect(c.status, l.name).toBe(400);
      // The session serves on: the same authority in another case is the same (served).
      const same = await get(s, { ':path': l.path, ':authority': `localhost:${l.port}`, host: `LOCALHOST:${l.port}` });
      expect(same.status, `${l.name}: ${same.text}`).toBe(200);
    }
  });

  it('userinfo in :authority is refused 400 naming :authority', async () => {
    for (const l of listeners()) {
      const s = await connect(l.port);
      for (const authority of [`user:pass@localhost:${l.port}`, `@localhost:${l.port}`]) {
        const r = await get(s, { ':path': l.path, ':authority': authority }).catch((e: Error) => e);
        // A newer nghttp2 (Node 26's) resets such a stream itself (PROTOCOL_ERROR): refused, never served.
        if (r instanceof Error && NGHTTP2_REFUSES && /PROTOCOL_ERROR/.test(r.message)) continue;
        if (r instanceof Error) throw r;
        expect(r.status, `${l.name} ${authority}: ${r.text}`).toBe(400);
        expect(JSON.parse(r.text).error, l.name).toMatchObject({ type: 'invalid_request', param: ':authority' });
        expect(JSON.parse(r.text).error.message, l.name).toMatch(/userinfo/);
      }
      expect((await get(s, { ':path': l.path })).status, l.name).toBe(200);
    }
  });

  it('userinfo in Host, with no :authority, is refused 400 naming host', async () => {
    for (const l of listeners()) {
      const c = await RawH2.connectTls(l.port, certs.caPem);
      c.write(
        frame(
          T.HEADERS,
          F.END_HEADERS | F.END_STREAM,
          1,
          hpack([
            [':method', 'GET'],
            [':scheme', 'https'],
            [':path', l.path],
            ['host', `user:pass@localhost:${l.port}`],
            ['authorization', `Bearer ${t.admin}`],
          ]),
        ),
      );
      const until = Date.now() + 3000;
      while (Date.now() < until && !c.frames.some((f) => f.stream === 1 && (f.flags & F.END_STREAM) !== 0))
        await new Promise((r) => setTimeout(r, 20));
      c.destroy();
      const body = Buffer.concat(c.frames.filter((f) => f.stream === 1 && f.type === T.DATA).map((f) => f.payload));
      // A newer nghttp2 (Node 26's) resets such a stream itself (RST_STREAM PROTOCOL_ERROR): refused, never served.
      const reset = c.frames.find((f) => f.stream === 1 && f.type === T.RST_STREAM);
      if (NGHTTP2_REFUSES && body.length === 0 && reset?.payload.readUInt32BE(0) === 1) continue;
      expect(body.toString(), l.name).toMatch(/^\{/);
      expect(JSON.parse(body.toString()).error, l.name).toMatchObject({ type: 'invalid_request', param: 'host' });
    }
  });
});
