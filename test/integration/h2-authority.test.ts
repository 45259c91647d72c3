import http2, { type ClientHttp2Session, type OutgoingHttpHeaders } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { F, frame, hpack, RawH2, T } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * A review's item: RFC 9113 §8.3.1 says `:authority` MUST NOT include the deprecated
 * userinfo subcomponent for http and https URIs. `:authority: user:pass@localhost` was
 * served, and passed on to the origin as X-Forwarded-Host (credentials in a field the
 * origin builds its links from). Such a request is malformed: 400 with the error body,
 * never forwarded. A real node:http2 client on the TLS listener (h2 by ALPN).
 */
describe('HTTP/2 :authority with userinfo', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let url: string;
  let port: number;
  let s: ClientHttp2Session;
  const seen: string[][] = [];

  beforeAll(async () => {
    certs = makeCerts();
    origin = await startServer((req, res) => {
      seen.push(req.rawHeaders);
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      server: { tls: { certificates: [{ cert: certs.server.cert, key: certs.server.key }] } },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
    url = `https://localhost:${port}`;
    s = await new Promise<ClientHttp2Session>((resolve, reject) => {
      const c = http2.connect(url, { ca: certs.caPem });
      c.once('connect', () => resolve(c));
      c.once('error', reject);
    });
  });
  afterAll(async () => {
    s?.close();
    await t.cleanup();
    await origin.close();
    certs.cleanup();
  });

  /** One GET on the session: its status and body. */
  const get = (headers: OutgoingHttpHeaders): Promise<{ status: number; text: string; alpn: string }> =>
    new Promise((resolve, reject) => {
      const r = s.request({ ':method': 'GET', ...headers });
      let status = 0;
      const chunks: Buffer[] = [];
      r.on('response', (h) => {
        status = Number(h[':status']);
      });
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => resolve({ status, text: Buffer.concat(chunks).toString(), alpn: String(s.alpnProtocol) }));
      r.on('error', reject);
      r.end();
    });

  it('is refused 400 invalid_request naming :authority, and never reaches the origin', async () => {
    for (const authority of [
      `user:pass@localhost:${port}`,
      `user@localhost:${port}`,
      `@localhost:${port}`,
      'admin:secret@localhost',
      `localhost:${port}@evil.example`,
    ]) {
      seen.length = 0;
      const r = await get({ ':path': '/open/who', ':authority': authority });
      expect(r.alpn).toBe('h2');
      expect(r.status, authority).toBe(400);
      expect(JSON.parse(r.text).error, authority).toMatchObject({
        type: 'invalid_request',
        param: ':authority',
        retry_after: null,
      });
      expect(JSON.parse(r.text).error.message, authority).toMatch(/userinfo/);
      expect(seen, authority).toHaveLength(0);
    }
  });

  it('is refused the same when Host repeats it', async () => {
    seen.length = 0;
    const a = `user:pass@localhost:${port}`;
    const r = await get({ ':path': '/open/who', ':authority': a, host: a });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error.param).toBe(':authority');
    expect(seen).toHaveLength(0);
  });

  it('a Host with userinfo and no :authority is refused too, naming host', async () => {
    const c = await RawH2.connectTls(port, certs.caPem);
    const fields: [string, string][] = [
      [':method', 'GET'],
      [':scheme', 'https'],
      [':path', '/open/who'],
      ['host', 'user:pass@localhost'],
    ];
    seen.length = 0;
    c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, hpack(fields)));
    const until = Date.now() + 3000;
    while (Date.now() < until && !c.frames.some((f) => f.stream === 1 && (f.flags & F.END_STREAM) !== 0))
      await new Promise((r) => setTimeout(r, 20));
    c.destroy();
    const body = Buffer.concat(c.frames.filter((f) => f.stream === 1 && f.type === T.DATA).map((f) => f.payload));
    expect(JSON.parse(body.toString()).error).toMatchObject({ type: 'invalid_request', param: 'host' });
    expect(seen).toHaveLength(0);
  });

  it('an authority without userinfo is served, and passed on as X-Forwarded-Host', async () => {
    seen.length = 0;
    const r = await get({ ':path': '/open/who' });
    expect(r.status, r.text).toBe(200);
    expect(seen).toHaveLength(1);
    const raw = seen[0] as string[];
    expect(raw[raw.findIndex((v) => v.toLowerCase() === 'x-forwarded-host') + 1]).toBe(`localhost:${port}`);
    // The session served on after the refusals.
    expect((await get({ ':path': '/open/again' })).status).toBe(200);
  });
});
