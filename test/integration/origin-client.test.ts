import http from 'node:http';
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { originParser } from '../../src/proxy/origin-client.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2once } from '../helpers/h2.js';
import { rawExchange, statusOf } from '../helpers/raw.js';
import { ok, type Scripted, scripted } from '../helpers/scripted-origin.js';

/**
 * The proxy's own client to its origins (src/proxy/origin-client.ts), against origins
 * that answer as real servers sometimes do: twice, with 1xx first, until they close,
 * closing a kept connection as the next request arrives. What must never happen: an
 * answer reaching a request it was not for, or bytes of one request read by the origin
 * as another.
 */

async function get(base: string, path: string, method = 'GET', body?: string) {
  const r = await fetch(`${base}${path}`, { method, body });
  return { status: r.status, text: await r.text(), headers: r.headers };
}

describe('the proxy client to origins', () => {
  const origins: Scripted[] = [];
  let t: TestGateway;
  let twice: Scripted;
  let twiceLater: Scripted;
  let informational: Scripted;
  let untilClose: Scripted;
  let dropsKept: Scripted;
  let switches: Scripted;
  let hinted: Scripted;
  let plain: http.Server;
  let plainConnections = 0;

  beforeAll(async () => {
    // Answers its first connection's first request twice in one write; every other request once.
    twice = await scripted((_h, conn, n, s) => {
      // The second answer parses cleanly (no body): only the client's own rule stops it being taken for the next.
      if (conn === 0 && n === 0) s.write(`${ok('first')}HTTP/1.1 204 No Content\r\n\r\n`);
      else s.write(ok(`fresh ${conn}`));
    });
    // The same, the second answer 50 ms later, while the connection is idle in the pool.
    twiceLater = await scripted((_h, conn, n, s) => {
      s.write(ok(`answer ${conn}.${n}`));
      if (conn === 0 && n === 0) setTimeout(() => s.write('HTTP/1.1 204 No Content\r\n\r\n'), 50);
    });
    informational = await scripted((_h, _c, _n, s) => {
      s.write('HTTP/1.1 100 Continue\r\n\r\n');
      s.write('HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n');
      s.write(ok('after the hints'));
    });
    // No length, not chunked: the body is what comes before the connection ends.
    untilClose = await scripted((_h, _c, _n, s) => {
      s.end('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it, until the end');
    });
    // Keeps its connections, but closes one unanswered the first time a request asks it to.
    const dropped = new Set<string>();
    dropsKept = await scripted((head, conn, n, s) => {
      const target = head.split(' ')[1] as string;
      if (target.includes('drop-me') && !dropped.has(target)) {
        dropped.add(target);
        s.destroy();
      } else s.write(ok(`kept ${conn}.${n}`));
    });
    switches = await scripted((_h, _c, _n, s) => {
      s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    });
    // Says how long it keeps an idle connection: 1 s (too short to keep it) or 30 s.
    hinted = await scripted((head, conn, n, s) => {
      const seconds = head.includes('/short') ? 1 : 30;
      s.write(ok(`hinted ${conn}.${n}`, `Keep-Alive: timeout=${seconds}, max=100\r\n`));
    });
    origins.push(twice, twiceLater, informational, untilClose, dropsKept, switches, hinted);
    plain = http.createServer((req, res) => {
      if (req.url?.includes('/events')) {
        // An event stream: its head at once, its first event a while later.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        setTimeout(() => res.end('data: late\n\n'), 1500).unref();
        return;
      }
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 5 });
        res.end(req.method === 'HEAD' ? undefined : 'plain');
      });
    });
    plain.on('connection', () => plainConnections++);
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
    const plainUrl = `http://127.0.0.1:${(plain.address() as net.AddressInfo).port}`;
    const route = (name: string, url: string) => ({
      name,
      prefix: `/${name}`,
      auth: 'none',
      origins: { production: url },
    });
    t = await startGateway({
      // Bodies past 1 KiB stream to the origin as they come.
      server: { http2: 'h2c', buffer_request_body_bytes: 1024 },
      routes: [
        route('twice', twice.url),
        route('later', twiceLater.url),
        route('info', informational.url),
        route('close', untilClose.url),
        route('drops', dropsKept.url),
        route('switch', switches.url),
        route('hinted', hinted.url),
        route('plain', plainUrl),
        { ...route('slowup', plainUrl), timeout_ms: 300 },
      ],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    for (const o of origins) await o.close();
    plain.closeAllConnections();
    await new Promise((r) => plain.close(r));
  });

  it('runs on Node’s own parser on this Node (not the undici fallback)', () => {
    expect(originParser).not.toBeNull();
  });

  it('an origin that answers one request twice: the second answer reaches no other request', async () => {
    expect(await get(t.url, '/twice/a')).toMatchObject({ status: 200, text: 'first' });
    const next = await get(t.url, '/twice/b');
    expect(next).toMatchObject({ status: 200, text: 'fresh 1' });
    expect(twice.connections).toBe(2);
  });

  it('an answer that comes while the connection is idle closes it; the next request gets its own', async () => {
    expect(await get(t.url, '/later/a')).toMatchObject({ status: 200, text: 'answer 0.0' });
    await new Promise((r) => setTimeout(r, 200));
    const next = await get(t.url, '/later/b');
    expect(next).toMatchObject({ status: 200, text: 'answer 1.0' });
  });

  it('1xx answers before the answer are not passed on', async () => {
    const r = await get(t.url, '/info/x');
    expect(r).toMatchObject({ status: 200, text: 'after the hints' });
    expect(r.headers.get('link')).toBeNull();
  });

  it('an answer delimited by the end of its connection is passed on whole', async () => {
    for (let i = 0; i < 2; i++) {
      expect(await get(t.url, '/close/x')).toMatchObject({ status: 200, text: 'all of it, until the end' });
    }
  });

  it('a kept connection closed as a request arrives: a GET is sent once more, a POST is not', async () => {
    expect(await get(t.url, '/drops/a')).toMatchObject({ status: 200, text: 'kept 0.0' });
    // Sent on the kept connection, which the origin closes unanswered: sent again on a new one.
    expect(await get(t.url, '/drops/b?drop-me')).toMatchObject({ status: 200, text: 'kept 1.0' });
    expect(dropsKept.heads.filter((h) => h.startsWith('GET /drops/b'))).toHaveLength(2);
    expect(await get(t.url, '/drops/c')).toMatchObject({ status: 200, text: 'kept 1.1' });
    // The same loss for a POST: it may have been acted on, so it is not sent twice.
    const post = await get(t.url, '/drops/d?drop-me', 'POST', 'once');
    expect(post.status).toBe(502);
    expect(JSON.parse(post.text).error.type).toBe('upstream_unavailable');
    expect(dropsKept.heads.filter((h) => h.startsWith('POST /drops/d'))).toHaveLength(1);
    expect(dropsKept.connections).toBe(2);
  });

  it('an origin switching protocols unasked is a 502', async () => {
    const r = await get(t.url, '/switch/x');
    expect(r.status).toBe(502);
    expect(JSON.parse(r.text).error.type).toBe('upstream_unavailable');
  });

  it("keeps a connection by the origin's Keep-Alive timeout: not when it leaves no time", async () => {
    expect(await get(t.url, '/hinted/long')).toMatchObject({ text: 'hinted 0.0' });
    expect(await get(t.url, '/hinted/short')).toMatchObject({ text: 'hinted 0.1' });
    // That answer said 1 s: the connection was closed rather than kept a second too long.
    expect(await get(t.url, '/hinted/long')).toMatchObject({ text: 'hinted 1.0' });
    expect(hinted.connections).toBe(2);
  });

  it('an answer of no announced length: its head reaches the client before its first body bytes', async () => {
    const t0 = performance.now();
    const r = await fetch(`${t.url}/plain/events`);
    const headMs = performance.now() - t0;
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/event-stream');
    // The first event is 1.5 s away; the head came long before it.
    expect(headMs).toBeLessThan(1000);
    expect(await r.text()).toBe('data: late\n\n');
  });

  it("a body streaming at a slow client's pace for longer than timeout_ms is not a timeout: it counts from the body's end", async () => {
    const port = Number(new URL(t.url).port);
    const answer = await new Promise<string>((resolve, reject) => {
      const req = http.request({ port, host: '127.0.0.1', method: 'POST', path: '/slowup/x', agent: false }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => {
          text += c.toString();
        });
        res.on('end', () => resolve(`${res.statusCode} ${text}`));
      });
      req.on('error', reject);
      let i = 0;
      // 10 pieces of 1 KiB, 100 ms apart: a second in all, against the route's 300 ms.
      const tick = setInterval(() => {
        req.write(Buffer.alloc(1024, 0x61));
        if (++i === 10) {
          clearInterval(tick);
          req.end();
        }
      }, 100);
    });
    expect(answer).toBe('200 plain');
  });

  it('a POST or DELETE without a body tells the origin its length is 0; a GET says nothing of one', async () => {
    const seen = (m: string, p: string) => dropsKept.heads.find((h) => h.startsWith(`${m} ${p} `)) ?? '';
    const port = Number(new URL(t.url).port);
    // Sent raw: no length and no body said (fetch and node:http would add Content-Length: 0 themselves).
    for (const [m, p] of [
      ['POST', '/drops/empty-post'],
      ['DELETE', '/drops/empty-delete'],
      ['GET', '/drops/empty-get'],
    ]) {
      const r = await rawExchange(port, `${m} ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(statusOf(r.text)).toBe(200);
    }
    expect(seen('POST', '/drops/empty-post')).toMatch(/\r\ncontent-length: 0(\r\n|$)/i);
    expect(seen('DELETE', '/drops/empty-delete')).toMatch(/\r\ncontent-length: 0(\r\n|$)/i);
    expect(seen('GET', '/drops/empty-get')).not.toMatch(/content-length/i);
  });

  it('keeps one connection for requests in turn, HEAD answers among them', async () => {
    const before = plainConnections;
    for (const method of ['GET', 'HEAD', 'GET', 'HEAD', 'POST']) {
      const r = await get(t.url, '/plain/x', method, method === 'POST' ? 'a body' : undefined);
      expect(r.status).toBe(200);
      expect(r.text).toBe(method === 'HEAD' ? '' : 'plain');
    }
    // One connection at most (the one kept from the test before, or a new one), never one a request.
    expect(plainConnections - before).toBeLessThanOrEqual(1);
  });

  it('an HTTP/2 body longer than its Content-Length never reaches the origin as a second request', async () => {
    const smuggled = 'GET /twice/smuggled HTTP/1.1\r\nHost: x\r\n\r\n';
    // Refused either by the HTTP/2 layer (a malformed stream, RFC 9113 §8.1.1) or by the origin client.
    const status = await h2once(
      t.url,
      { ':method': 'POST', ':path': '/twice/h2', 'content-length': '3' },
      `abc${smuggled}`,
    )
      .then((r) => r.status)
      .catch((e: Error) => e.message);
    expect(status).not.toBe(200);
    await new Promise((res) => setTimeout(res, 100));
    expect(twice.heads.some((h) => h.includes('/smuggled'))).toBe(false);
  });
});
