import { execFile } from 'node:child_process';
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/** What curl --http2 adds to a request on http:// (curl 7.88): an h2c upgrade offer. */
const OFFER = 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n';

/** A request seen by the origin. */
interface Seen {
  method: string;
  url: string;
  rawHeaders: string[];
}

/** The named field of raw headers (lower-cased name), all its values. */
const field = (raw: readonly string[], name: string): string[] => {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.toLowerCase() === name) out.push(raw[i + 1] as string);
  return out;
};

/** The head of a raw HTTP/1.1 answer as name → value (the last of each), and its body. */
const parse = (text: string) => {
  const at = text.indexOf('\r\n\r\n');
  const head = text.slice(0, at).split('\r\n').slice(1);
  const headers: Record<string, string> = {};
  for (const l of head) {
    const c = l.indexOf(':');
    headers[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
  }
  return { headers, body: text.slice(at + 4) };
};

/** The upgrade offer never reached the origin: no Upgrade, no HTTP2-Settings, no Connection naming them. */
const expectNoOffer = (s: Seen | undefined) => {
  expect(s).toBeDefined();
  const raw = (s as Seen).rawHeaders;
  expect(field(raw, 'upgrade')).toEqual([]);
  expect(field(raw, 'http2-settings')).toEqual([]);
  for (const v of field(raw, 'connection')) expect(v.toLowerCase()).not.toMatch(/upgrade|http2-settings/);
};

const curl = (args: string[]): Promise<{ code: number; out: string }> =>
  new Promise((resolve) => {
    execFile('curl', ['-sS', '-i', '--max-time', '10', ...args], (err, out) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out }),
    );
  });

const hasCurl = await new Promise<boolean>((r) => execFile('curl', ['--version'], (err) => r(err === null)));

describe('an upgrade offer the route does not take (curl --http2 on http://)', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  let key: string;
  const seen: Seen[] = [];
  const upgrades: string[] = [];
  let aborted = 0;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', rawHeaders: req.rawHeaders });
      if (req.url?.startsWith('/open/slow')) {
        const timer = setTimeout(() => res.end('slow'), 1500);
        res.on('close', () => {
          if (!res.writableFinished) {
            aborted++;
            clearTimeout(timer);
          }
        });
        return;
      }
      if (req.url?.startsWith('/open/big')) {
        // 32 MiB, written as fast as the gateway takes it.
        const chunk = Buffer.alloc(64 * 1024, 120);
        let left = 512;
        res.writeHead(200, { 'content-length': String(left * chunk.length) });
        const more = () => {
          while (left > 0) {
            left--;
            if (!res.write(chunk)) return void res.once('drain', more);
          }
          res.end();
        };
        res.on('error', () => {});
        return more();
      }
      req.resume();
      req.on('end', () => res.end(`hello from origin ${req.url}`));
    });
    // A WebSocket-style origin: switches, then echoes.
    origin.server.on('upgrade', (req, socket) => {
      upgrades.push(`${req.headers.upgrade} ${req.url}`);
      socket.on('error', () => {});
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
      socket.on('data', (c: Buffer) => socket.write(c));
      socket.on('end', () => socket.end());
    });
    t = await startGateway({
      server: { send_timeout_ms: 500, buffer_response_body_bytes: 65_536 },
      routes: [
        { name: 'public', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        {
          name: 'pay',
          prefix: '/pay',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url },
        },
        { name: 'nows', prefix: '/nows', auth: 'none', upgrades: [], origins: { production: origin.url } },
      ],
    });
    port = Number(new URL(t.url).port);
    key = (await t.gw.keys.create({ label: 'o', environment: 'production', scopes: ['payments:read'] }, 'production'))
      .secret;
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const wakeOf = async (path: string) => {
    await flushed(t.gw);
    const page = await t.gw.wakes.list({ environment: 'production', pathPattern: `^${path}$` }, 10, null);
    return page.rows[0];
  };

  it('a bodyless GET offering h2c is served as HTTP/1.1: 200, Connection: close, its wake stored, no offer forwarded', async () => {
    seen.length = 0;
    const r = await rawExchange(
      port,
      `GET /open/first?x=1 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n${OFFER}\r\n`,
      5000,
    );
    expect(statusOf(r.text)).toBe(200);
    // The gateway closes the connection after the answer (nothing waits for the client).
    expect(r.closed).toBe(true);
    const { headers, body } = parse(r.text);
    expect(headers.connection).toBe('close');
    expect(headers.upgrade).toBeUndefined();
    expect(headers['x-wake-id']).toMatch(/^wk_/);
    expect(body).toBe('hello from origin /open/first?x=1');
    expect(seen).toHaveLength(1);
    expectNoOffer(seen[0]);
    expect(field(seen[0]?.rawHeaders ?? [], 'user-agent')).toEqual(['curl/7.88.1']);
    const wake = await wakeOf('/open/first');
    expect(wake).toMatchObject({ id: headers['x-wake-id'], status: 200, route: 'public', method: 'GET' });
    expect(upgrades).toEqual([]);
  });

  it.runIf(hasCurl)('curl --http2 on the plain listener gets the answer over HTTP/1.1', async () => {
    seen.length = 0;
    const r = await curl(['--http2', `${t.url}/open/curl`]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^HTTP\/1\.1 200 /);
    expect(r.out).toMatch(/\r\nx-wake-id: wk_/i);
    expect(r.out.endsWith('hello from origin /open/curl')).toBe(true);
    expect(seen).toHaveLength(1);
    expectNoOffer(seen[0]);
    // A HEAD too (curl -I), and a keyed route with its key.
    const head = await curl(['--http2', '-I', `${t.url}/open/curl-head`]);
    expect(head.out).toMatch(/^HTTP\/1\.1 200 /);
    const keyed = await curl(['--http2', '-H', `Authorization: Bearer ${key}`, `${t.url}/pay/curl`]);
    expect(keyed.out).toMatch(/^HTTP\/1\.1 200 /);
    expect(seen.map((s) => s.url)).toEqual(['/open/curl', '/open/curl-head', '/pay/curl']);
    for (const s of seen) expectNoOffer(s);
  });

  it.runIf(hasCurl)('curl --http2 with a body is refused with a 400 that says how to send it', async () => {
    seen.length = 0;
    const r = await curl(['--http2', '-d', 'a=1', `${t.url}/open/curl-post`]);
    expect(r.out).toMatch(/^HTTP\/1\.1 400 /);
    expect(r.out).toContain('without \\"Upgrade: h2c\\"');
    expect(seen).toEqual([]);
    // The same without the offer is served.
    const plain = await curl(['--http1.1', '-d', 'a=1', `${t.url}/open/curl-post`]);
    expect(plain.out).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('an offer on a request with a body (Content-Length or chunked) is refused with a clear 400, nothing forwarded', async () => {
    seen.length = 0;
    for (const framing of [
      'Content-Length: 5\r\n\r\nhello',
      'Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
    ]) {
      const r = await rawExchange(port, `POST /open/body HTTP/1.1\r\nHost: x\r\n${OFFER}${framing}`, 5000);
      expect(statusOf(r.text), framing).toBe(400);
      expect(r.closed).toBe(true);
      const b = JSON.parse(parse(r.text).body);
      expect(b.error.type).toBe('invalid_request');
      expect(b.error.param).toBe('upgrade');
      expect(b.error.message).toContain('routes[].upgrades: websocket');
      expect(b.error.message).toContain('without "Upgrade: h2c"');
    }
    expect(seen).toEqual([]);
    expect(upgrades).toEqual([]);
  });

  it('Content-Length: 0 is no body: served', async () => {
    seen.length = 0;
    const r = await rawExchange(
      port,
      `POST /open/empty HTTP/1.1\r\nHost: x\r\n${OFFER}Content-Length: 0\r\n\r\n`,
      5000,
    );
    expect(statusOf(r.text)).toBe(200);
    expect(parse(r.text).body).toBe('hello from origin /open/empty');
    expectNoOffer(seen[0]);
  });

  it('on a keyed route the offer passes the same checks as any request: a bad key is a 401, a good one is served as its key', async () => {
    seen.length = 0;
    const bad = await rawExchange(
      port,
      `GET /pay/x HTTP/1.1\r\nHost: x\r\n${OFFER}Authorization: Bearer svc_live_${'A'.repeat(40)}\r\n\r\n`,
      5000,
    );
    expect(statusOf(bad.text)).toBe(401);
    expect(parse(bad.text).headers.connection).toBe('close');
    const none = await rawExchange(port, `GET /pay/x HTTP/1.1\r\nHost: x\r\n${OFFER}\r\n`, 5000);
    expect(statusOf(none.text)).toBe(401);
    expect(seen).toEqual([]);
    const good = await rawExchange(
      port,
      `GET /pay/x HTTP/1.1\r\nHost: x\r\n${OFFER}Authorization: Bearer ${key}\r\n\r\n`,
      5000,
    );
    expect(statusOf(good.text)).toBe(200);
    expect(seen).toHaveLength(1);
    expectNoOffer(seen[0]);
    const raw = seen[0]?.rawHeaders ?? [];
    expect(field(raw, 'authorization')).toEqual([]);
    expect(field(raw, 'x-wakegate-key-id')).toHaveLength(1);
  });

  it('a WebSocket offer on a route that lists no upgrades is served as plain HTTP/1.1 too', async () => {
    seen.length = 0;
    const r = await rawExchange(
      port,
      'GET /nows/chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      5000,
    );
    expect(statusOf(r.text)).toBe(200);
    expect(parse(r.text).body).toBe('hello from origin /nows/chat');
    expectNoOffer(seen[0]);
    expect(upgrades).toEqual([]);
  });

  it('WebSocket still tunnels on a route that allows it, and the origin is offered only what the route lists', async () => {
    const open = (upgrade: string) =>
      new Promise<{ text: string; echoed: string }>((resolve, reject) => {
        const s = net.connect(port, '127.0.0.1');
        s.on('error', reject);
        let text = '';
        let sent = false;
        s.on('data', (c: Buffer) => {
          text += c.toString('latin1');
          const at = text.indexOf('\r\n\r\n');
          if (at === -1) return;
          if (!sent) {
            sent = true;
            s.write('ping');
          }
          if (text.slice(at + 4) === 'ping') {
            s.destroy();
            resolve({ text, echoed: 'ping' });
          }
        });
        s.write(`GET /open/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: ${upgrade}\r\n\r\n`);
      });
    upgrades.length = 0;
    const a = await open('websocket');
    expect(statusOf(a.text)).toBe(101);
    expect(parse(a.text).headers['x-wake-id']).toMatch(/^wk_/);
    const b = await open('websocket, h2c');
    expect(statusOf(b.text)).toBe(101);
    expect(upgrades).toEqual(['websocket /open/ws', 'websocket /open/ws']);
  });

  it('bytes right behind the offer (a client that presumed the switch) are refused, never forwarded', async () => {
    seen.length = 0;
    const r = await rawExchange(
      port,
      `GET /open/presumed HTTP/1.1\r\nHost: x\r\n${OFFER}\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`,
      5000,
    );
    expect(statusOf(r.text)).toBe(400);
    expect(r.text).toContain('routes[].upgrades: websocket');
    expect(seen).toEqual([]);
  });

  it('Expect: 100-continue is answered as without the offer; another expectation is a 417', async () => {
    seen.length = 0;
    const r = await rawExchange(
      port,
      `GET /open/expect HTTP/1.1\r\nHost: x\r\n${OFFER}Expect: 100-continue\r\n\r\n`,
      5000,
    );
    expect(r.text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    expect(r.text.endsWith('hello from origin /open/expect')).toBe(true);
    expectNoOffer(seen[0]);
    const odd = await rawExchange(port, `GET /open/expect HTTP/1.1\r\nHost: x\r\n${OFFER}Expect: 200-ok\r\n\r\n`, 5000);
    expect(statusOf(odd.text)).toBe(417);
    expect(odd.closed).toBe(true);
    expect(seen).toHaveLength(1);
  });

  it('a /v2 call offering h2c is answered by the API, as without the offer', async () => {
    const r = await rawExchange(
      port,
      `GET /v2/wakes?limit=1 HTTP/1.1\r\nHost: x\r\n${OFFER}Authorization: Bearer ${t.admin}\r\n\r\n`,
      5000,
    );
    expect(statusOf(r.text)).toBe(200);
    expect(JSON.parse(parse(r.text).body).object).toBe('list');
  });

  it('pipelined behind a keep-alive request, the offer is served after it, in order', async () => {
    seen.length = 0;
    const r = await rawExchange(
      port,
      `GET /open/p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /open/p2 HTTP/1.1\r\nHost: x\r\n${OFFER}\r\n`,
      5000,
    );
    expect(r.closed).toBe(true);
    expect(r.text.match(/HTTP\/1\.1 200 /g)).toHaveLength(2);
    expect(r.text.indexOf('hello from origin /open/p1')).toBeLessThan(r.text.indexOf('hello from origin /open/p2'));
    expect(seen.map((s) => s.url)).toEqual(['/open/p1', '/open/p2']);
    expectNoOffer(seen[1]);
  });

  it('a client gone while the origin is slow: the origin request is abandoned and the wake says 499', async () => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.write(`GET /open/slow HTTP/1.1\r\nHost: x\r\n${OFFER}\r\n`);
    await new Promise((r) => setTimeout(r, 300));
    s.destroy();
    await expect.poll(() => aborted, { timeout: 3000 }).toBe(1);
    expect((await wakeOf('/open/slow'))?.status).toBe(499);
  });

  it('a client that reads nothing of a large answer is cut after send_timeout_ms (499)', async () => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.pause();
    s.write(`GET /open/big HTTP/1.1\r\nHost: x\r\n${OFFER}\r\n`);
    await expect.poll(async () => (await wakeOf('/open/big'))?.status, { timeout: 10_000, interval: 250 }).toBe(499);
    s.destroy();
  });

  it('the gateway serves on, and holds nothing of these connections', async () => {
    const r = await fetch(`${t.url}/open/after`);
    expect(await r.text()).toBe('hello from origin /open/after');
    await expect.poll(() => t.gw.tunnels.size, { timeout: 2000 }).toBe(0);
  });
});

describe('an upgrade offer declined on the TLS listener', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  const seen: Seen[] = [];

  beforeAll(async () => {
    certs = makeCerts();
    origin = await startServer((req, res) => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', rawHeaders: req.rawHeaders });
      res.end(`tls ${req.url}`);
    });
    t = await startGateway({
      server: { tls: { certificates: [{ cert: certs.server.cert, key: certs.server.key }] } },
      routes: [{ name: 'nows', prefix: '/nows', auth: 'none', upgrades: [], origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
    certs?.cleanup();
  });

  it('is served over HTTP/1.1 on TLS too, and the origin is told https', async () => {
    const port = Number(new URL(t.url).port);
    const text = await new Promise<string>((resolve, reject) => {
      const s = tls.connect({
        port,
        host: '127.0.0.1',
        servername: 'localhost',
        ca: certs.caPem,
        ALPNProtocols: ['http/1.1'],
      });
      let got = '';
      s.on('data', (c: Buffer) => {
        got += c.toString('latin1');
      });
      s.on('close', () => resolve(got));
      s.on('error', reject);
      s.write(
        'GET /nows/ws HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      );
    });
    expect(statusOf(text)).toBe(200);
    expect(parse(text).headers.connection).toBe('close');
    expect(parse(text).body).toBe('tls /nows/ws');
    expectNoOffer(seen[0]);
    expect(field(seen[0]?.rawHeaders ?? [], 'x-forwarded-proto')).toEqual(['https']);
  });
});
