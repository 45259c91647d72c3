// Request trailers on streamed bodies, and an origin's Content-Length trailer (2026-11-28).
import net from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2connect, h2request } from '../helpers/h2.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/** server.buffer_request_body_bytes of the gateway under test: bodies past it stream to the origin. */
const BUFFER = 16_384;
const BIG = 'b'.repeat(BUFFER * 3);

/** What a raw origin answers, by the request's path. */
const ANSWERS: Record<string, string> = {
  '/raw/upload': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  // RFC 9110 §6.5.1: a Content-Length in a trailer section is not to be used; the answer is whole.
  '/raw/cl-trailer':
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n0\r\nContent-Length: 5\r\nX-Sum: 1\r\n\r\n',
  // The same two fields in the head are a smuggling shape: still refused.
  '/raw/te-cl-head':
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
  '/raw/cl-te-head':
    'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
};

/**
 * An origin on a raw socket: every byte it receives is kept (`bytes`), and it answers a
 * request only once its whole body has come (by Content-Length, or chunked up to the end of
 * its trailer section), so a request cut off before its end is never answered.
 */
async function rawOrigin(): Promise<{
  url: string;
  bytes: () => string;
  ended: () => number;
  close: () => Promise<void>;
}> {
  let all = '';
  let ended = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    let buf = '';
    s.on('data', (d: Buffer) => {
      const text = d.toString('latin1');
      all += text;
      buf += text;
      for (;;) {
        const at = buf.indexOf('\r\n\r\n');
        if (at === -1) return;
        const head = buf.slice(0, at);
        const rest = buf.slice(at + 4);
        const length = /\r\ncontent-length: *(\d+)/i.exec(head);
        let used: number;
        if (length !== null) {
          used = Number(length[1]);
          if (rest.length < used) return;
        } else if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
          const n = chunkedEnd(rest);
          if (n === -1) return;
          used = n;
        } else used = 0;
        buf = rest.slice(used);
        ended++;
        const path = head.split(' ')[1] ?? '';
        s.write(ANSWERS[path] ?? 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n', 'latin1');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    bytes: () => all,
    ended: () => ended,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** Where a chunked body (and its trailer section) ends in `s`, or -1 before it has. */
function chunkedEnd(s: string): number {
  let i = 0;
  for (;;) {
    const eol = s.indexOf('\r\n', i);
    if (eol === -1) return -1;
    const size = Number.parseInt(s.slice(i, eol), 16);
    if (size === 0) {
      const end = s.indexOf('\r\n\r\n', eol);
      if (s.startsWith('\r\n', eol + 2)) return eol + 4;
      return end === -1 ? -1 : end + 4;
    }
    i = eol + 2 + size + 2;
    if (i > s.length) return -1;
  }
}

describe('request trailers after a body that streams (past buffer_request_body_bytes)', () => {
  let origin: TestServer;
  let raw: Awaited<ReturnType<typeof rawOrigin>>;
  let t: TestGateway;
  let port: number;
  /** What the Node origin received: each request's framing, body length, trailers, and every raw line. */
  let seen: { chunked: boolean; bytes: number; trailers: Record<string, string | undefined>; raw: string }[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      let bytes = 0;
      req.on('data', (c: Buffer) => {
        bytes += c.length;
      });
      req.on('end', () => {
        seen.push({
          chunked: req.headers['transfer-encoding'] === 'chunked',
          bytes,
          trailers: { ...req.trailers },
          raw: [...req.rawHeaders, ...req.rawTrailers].join('\n'),
        });
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
        res.end('ok');
      });
    });
    raw = await rawOrigin();
    t = await startGateway({
      server: { http2: 'h2c', buffer_request_body_bytes: BUFFER },
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        { name: 'raw', prefix: '/raw', auth: 'none', timeout_ms: 2000, origins: { production: raw.url } },
      ],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
    await raw?.close();
  });
  beforeEach(() => {
    seen = [];
  });

  /** A chunked POST on a raw socket: `body` in 4 KiB chunks, then `trailers`. */
  const h1post = (path: string, body: string, trailers: [string, string][]) => {
    let chunks = '';
    for (let i = 0; i < body.length; i += 4096) {
      const c = body.slice(i, i + 4096);
      chunks += `${c.length.toString(16)}\r\n${c}\r\n`;
    }
    return rawExchange(
      port,
      `POST ${path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunks}0\r\n` +
        `${trailers.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`,
      10_000,
    );
  };

  /** The same from Node's HTTP/2 client (no content-length: the stream frames the body), trailers by sendTrailers. */
  const h2post = async (path: string, body: string, trailers: [string, string][], headers = {}) => {
    const s = await h2connect(t.url);
    try {
      return await h2request(s, { ':path': path, ':method': 'POST', ...headers }, body, Object.fromEntries(trailers));
    } finally {
      s.close();
    }
  };

  const FIELDS: [string, string][] = [
    ['x-checksum', 'sha-256=abc'],
    ['grpc-status', '0'],
    ['x-wakegate-consumer', 'billing-service'],
    ['x_wakegate_key_id', 'key_forged'],
    ['x-forwarded-for', '10.9.9.9'],
    ['forwarded', 'for=10.9.9.9'],
    ['authorization', 'Basic Zm9vOmJhcg=='],
    ['host', 'elsewhere.example'],
    ['content-type', 'text/evil'],
    ['traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'],
  ];

  it('HTTP/1.1: the filtered trailers reach the origin after the streamed body, its request chunked', async () => {
    const r = await h1post('/open/upload', BIG, FIELDS);
    expect(statusOf(r.text)).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ chunked: true, bytes: BIG.length });
    expect(seen[0]?.trailers).toEqual({ 'x-checksum': 'sha-256=abc', 'grpc-status': '0' });
    for (const v of ['billing-service', 'key_forged', '10.9.9.9', 'Zm9vOmJhcg', 'elsewhere.example', 'text/evil'])
      expect(seen[0]?.raw).not.toContain(v);
    expect(seen[0]?.raw).not.toContain('0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331');
  });

  it('HTTP/2: the same, from a stream that sends its trailers after its DATA', async () => {
    const r = await h2post('/open/upload', BIG, FIELDS);
    expect(r.status).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ chunked: true, bytes: BIG.length });
    expect(seen[0]?.trailers).toEqual({ 'x-checksum': 'sha-256=abc', 'grpc-status': '0' });
    for (const v of ['billing-service', 'key_forged', '10.9.9.9', 'Zm9vOmJhcg', 'elsewhere.example', 'text/evil'])
      expect(seen[0]?.raw).not.toContain(v);
  });

  it('a streamed body whose trailers are all dropped ends as before (no trailer section)', async () => {
    const r = await h1post('/open/upload', BIG, [['x-wakegate-consumer', 'x']]);
    expect(statusOf(r.text)).toBe(200);
    expect(seen[0]).toMatchObject({ chunked: true, bytes: BIG.length, trailers: {} });
  });

  it('HTTP/1.1: a gateway key in a trailer of a streamed body refuses it (400, param trailers); the origin never has the key nor the end of the request', async () => {
    const key = `svc_live_${newSecret()}`;
    const before = raw.ended();
    const r = await h1post('/raw/upload', BIG, [
      ['x-checksum', 'abc'],
      ['x-token', key],
    ]);
    expect(statusOf(r.text)).toBe(400);
    const body = JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4));
    expect(body.error).toMatchObject({ type: 'invalid_request', param: 'trailers' });
    expect(r.text).not.toContain(key);
    await new Promise((res) => setTimeout(res, 100));
    expect(raw.bytes()).not.toContain(key);
    expect(raw.bytes()).not.toContain('x-checksum');
    expect(raw.ended()).toBe(before);
  });

  it('HTTP/2: the same (the key in the trailers HEADERS frame)', async () => {
    const key = `svc_live_${newSecret()}`;
    const before = raw.ended();
    const r = await h2post('/raw/upload', BIG, [
      ['x-checksum', 'abc'],
      ['x-token', key],
    ]);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error).toMatchObject({ type: 'invalid_request', param: 'trailers' });
    await new Promise((res) => setTimeout(res, 100));
    expect(raw.bytes()).not.toContain(key);
    expect(raw.ended()).toBe(before);
  });

  it('HTTP/2 with a content-length: the origin request keeps it (no trailer section), and a key in a trailer still refuses it before the body is whole', async () => {
    const ok = await h2post('/open/upload', BIG, [['x-checksum', 'abc']], { 'content-length': String(BIG.length) });
    expect(ok.status).toBe(200);
    expect(seen[0]).toMatchObject({ chunked: false, bytes: BIG.length, trailers: {} });
    const key = `svc_live_${newSecret()}`;
    const before = raw.ended();
    const r = await h2post('/raw/upload', BIG, [['x-token', key]], { 'content-length': String(BIG.length) });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error).toMatchObject({ type: 'invalid_request', param: 'trailers' });
    await new Promise((res) => setTimeout(res, 100));
    expect(raw.bytes()).not.toContain(key);
    expect(raw.ended()).toBe(before);
  });

  it("an origin's Content-Length trailer field is dropped and its answer relayed whole (HTTP/1.1 and HTTP/2), the connection reused", async () => {
    for (let i = 0; i < 2; i++) {
      const r = await rawExchange(
        port,
        'GET /raw/cl-trailer HTTP/1.1\r\nHost: x\r\nTE: trailers\r\nConnection: close\r\n\r\n',
      );
      expect(statusOf(r.text)).toBe(200);
      const tail = r.text.slice(r.text.indexOf('\r\n\r\n') + 4);
      expect(tail).toMatch(/^5\r\nhello\r\n0\r\n/);
      expect(tail).toMatch(/\r\nX-Sum: 1\r\n/i);
      expect(tail).not.toMatch(/content-length/i);
      const s = await h2connect(t.url);
      try {
        const h = await h2request(s, { ':path': '/raw/cl-trailer' });
        expect(h.status).toBe(200);
        expect(h.text).toBe('hello');
        expect(h.trailers['x-sum']).toBe('1');
        expect(h.trailers['content-length']).toBeUndefined();
      } finally {
        s.close();
      }
    }
  });

  it("a buffered body's trailers go on the origin client too: chunked, announced, and an origin's Content-Length trailer no longer cuts the answer", async () => {
    const before = raw.bytes().length;
    const r = await h1post('/raw/cl-trailer', 'small body', FIELDS);
    expect(statusOf(r.text)).toBe(200);
    const tail = r.text.slice(r.text.indexOf('\r\n\r\n') + 4);
    expect(tail).toMatch(/^5\r\nhello\r\n0\r\n/);
    expect(tail).not.toMatch(/content-length/i);
    const h2 = await h2post('/raw/cl-trailer', 'small body', FIELDS);
    expect(h2.status).toBe(200);
    expect(h2.text).toBe('hello');
    // What the origin had: each request chunked, its trailer names announced, the filtered fields after its last chunk.
    const sent = raw.bytes().slice(before);
    const requests = sent.split(/(?=POST \/raw\/cl-trailer )/).filter((x) => x.length > 0);
    expect(requests).toHaveLength(2);
    for (const q of requests) {
      expect(q).toMatch(/\r\ntransfer-encoding: chunked\r\n/i);
      expect(q).toMatch(/\r\nTrailer: x-checksum, grpc-status\r\n/);
      expect(q).not.toMatch(/\r\ncontent-length:/i);
      expect(q).toMatch(/\r\n0\r\nx-checksum: sha-256=abc\r\ngrpc-status: 0\r\n\r\n$/);
    }
  });

  it('an answer whose head holds both Transfer-Encoding and Content-Length is still refused (502), in either order', async () => {
    for (const path of ['/raw/te-cl-head', '/raw/cl-te-head']) {
      const r = await rawExchange(port, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(statusOf(r.text)).toBe(502);
      expect(r.text).not.toContain('hello');
    }
    const after = await rawExchange(port, 'GET /raw/cl-trailer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(statusOf(after.text)).toBe(200);
  });
});
