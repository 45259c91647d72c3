import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2connect, h2once, h2request } from '../helpers/h2.js';
import { deadPort, echoOrigin, startServer, type TestServer } from '../helpers/origin.js';

/** Issue #37: each HTTP/2 stream is a request like any other (h2c with prior knowledge, Node's own client). */
describe('HTTP/2 (h2c) through the proxy', () => {
  let origin: TestServer;
  let special: TestServer;
  let t: TestGateway;
  let secret: string;
  const BIG = 3 * 1024 * 1024;
  let hangStarted: () => void = () => {};
  let hangCut: () => void = () => {};

  beforeAll(async () => {
    origin = await echoOrigin('prod');
    special = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/x/hop') {
          res.writeHead(200, [
            'Connection',
            'close, x-hop',
            'Keep-Alive',
            'timeout=5',
            'x-hop',
            'gone',
            'Proxy-Connection',
            'keep-alive',
            'Set-Cookie',
            'a=1',
            'Set-Cookie',
            'b=2',
            'content-type',
            'text/plain',
          ]);
          return void res.end('hop');
        }
        if (req.url === '/x/trailers') {
          res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum' });
          res.write('part ');
          res.addTrailers({ 'x-checksum': 'abc123' });
          return void res.end('two');
        }
        if (req.url === '/x/echo-trailers') {
          res.writeHead(200, { 'content-type': 'application/json' });
          return void res.end(JSON.stringify({ body: Buffer.concat(chunks).length, trailers: req.rawTrailers }));
        }
        if (req.url === '/x/dup') {
          res.writeHead(200, ['Content-Type', 'text/plain', 'content-type', 'text/html', 'x-many', '1', 'x-many', '2']);
          return void res.end('dup');
        }
        if (req.url === '/x/slow') return void setTimeout(() => res.end('late'), 300);
        if (req.url === '/x/hang') {
          hangStarted();
          res.on('close', () => {
            if (!res.writableFinished) hangCut();
          });
          return void setTimeout(() => res.end('late'), 1000);
        }
        if (req.url === '/x/big') {
          res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': BIG });
          return void res.end(Buffer.alloc(BIG, 7));
        }
        res.end(String(Buffer.concat(chunks).length));
      });
    });
    const dead = await deadPort();
    t = await startGateway({
      server: { http2: 'h2c', buffer_request_body_bytes: 65_536, buffer_response_body_bytes: 65_536 },
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        { name: 'x', prefix: '/x', auth: 'none', origins: { production: special.url } },
        { name: 'dead', prefix: '/dead', auth: 'none', origins: { production: `http://127.0.0.1:${dead}` } },
        {
          name: 'pay',
          prefix: '/pay',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url },
        },
      ],
    });
    ({ secret } = await t.gw.keys.create(
      {
        label: 'h2',
        environment: 'production',
        scopes: ['payments:read'],
        rate_limit: { limit: 60, burst: 3, window: 'minute' },
      },
      'production',
    ));
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
    await special.close();
  });

  it('serves a stream through the real proxy, :authority becoming Host, and the wake says h2', async () => {
    const r = await h2once(t.url, { ':path': '/open/a?x=1', 'x-a': '1', cookie: ['c=1', 'd=2'] });
    expect(r.status).toBe(200);
    const echo = JSON.parse(r.text);
    expect(echo.url).toBe('/open/a?x=1');
    const h: string[] = echo.rawHeaders;
    const pairs = Array.from({ length: h.length / 2 }, (_, i) => [h[2 * i], h[2 * i + 1]]);
    expect(pairs).toContainEqual(['x-a', '1']);
    // One Cookie for the HTTP/1.1 origin (RFC 9113 §8.2.3); the client's :authority is X-Forwarded-Host.
    expect(pairs.filter(([k]) => k?.toLowerCase() === 'cookie')).toEqual([['cookie', 'c=1; d=2']]);
    expect(pairs).toContainEqual(['X-Forwarded-Host', new URL(t.url).host]);
    expect(pairs.find(([k]) => k?.startsWith(':'))).toBeUndefined();
    const id = r.headers['x-wake-id'] as string;
    expect(id).toMatch(/^wk_/);
    await flushed(t.gw);
    const w = await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json();
    expect(w).toMatchObject({ id, protocol: 'h2', method: 'GET', path: '/open/a', status: 200 });
  });

  it('still serves HTTP/1.1 on the same listener, recorded as http/1.1', async () => {
    const r = await fetch(`${t.url}/open/h1`);
    expect(r.status).toBe(200);
    expect((await r.json()).url).toBe('/open/h1');
    await flushed(t.gw);
    const w = await (
      await fetch(`${t.url}/v2/wakes/${r.headers.get('x-wake-id')}`, { headers: bearer(t.admin) })
    ).json();
    expect(w.protocol).toBe('http/1.1');
  });

  it('admission, key and buckets hold per stream: 401 without a key, then the bucket, then 429', async () => {
    const s = await h2connect(t.url);
    try {
      const no = await h2request(s, { ':path': '/pay/x' });
      expect(no.status).toBe(401);
      expect(JSON.parse(no.text).error.type).toBe('authentication_required');
      expect(no.headers['x-wake-id']).toMatch(/^wk_/);
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const r = await h2request(s, { ':path': '/pay/x', ...bearer(secret) });
        statuses.push(r.status);
        if (r.status === 200) {
          // The key never reaches the origin; its identity does.
          const echo = JSON.parse(r.text);
          expect(echo.rawHeaders.map((v: string) => v.toLowerCase())).not.toContain('authorization');
          expect(echo.rawHeaders).toContain('x-wakegate-key-id');
          expect(r.headers['x-ratelimit-limit']).toBe('60');
        } else {
          expect(r.headers['retry-after']).toBe('1');
          expect(JSON.parse(r.text).error.type).toBe('rate_limit_exceeded');
        }
      }
      expect(statuses).toEqual([200, 200, 200, 429, 429]);
    } finally {
      s.close();
    }
  });

  it('never sends connection-specific fields to the client (RFC 9113 §8.2.2), keeps repeated ones', async () => {
    const r = await h2once(t.url, { ':path': '/x/hop' });
    expect(r.status).toBe(200);
    expect(r.text).toBe('hop');
    for (const f of ['connection', 'keep-alive', 'proxy-connection', 'x-hop', 'transfer-encoding'])
      expect(r.headers[f]).toBeUndefined();
    expect(r.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    // A field HTTP/2 sends once, repeated by the origin: the first, not a failed answer.
    const dup = await h2once(t.url, { ':path': '/x/dup' });
    expect(dup.status).toBe(200);
    expect(dup.headers['content-type']).toBe('text/plain');
    expect(dup.headers['x-many']).toBe('1, 2');
  });

  it('passes response trailers and request trailers', async () => {
    const r = await h2once(t.url, { ':path': '/x/trailers' });
    expect(r.text).toBe('part two');
    expect(r.trailers['x-checksum']).toBe('abc123');
    const s = await h2connect(t.url);
    try {
      const up = await h2request(s, { ':path': '/x/echo-trailers' }, 'hello', { 'x-sum': '42' });
      const echo = JSON.parse(up.text);
      expect(echo.body).toBe(5);
      expect(echo.trailers).toEqual(['x-sum', '42']);
    } finally {
      s.close();
    }
  });

  it('streams bodies both ways past the buffers, under flow control', async () => {
    const s = await h2connect(t.url);
    try {
      // Upload past buffer_request_body_bytes: streamed to the origin as it comes.
      const up = await h2request(s, { ':path': '/x/up' }, Buffer.alloc(BIG, 1));
      expect(up.status).toBe(200);
      expect(up.text).toBe(String(BIG));
      // Download past buffer_response_body_bytes, read slowly: paced by the client's window.
      const r = s.request({ ':path': '/x/big' });
      let n = 0;
      let status = 0;
      r.on('response', (h) => {
        status = Number(h[':status']);
      });
      r.pause();
      await new Promise((res) => setTimeout(res, 200));
      r.on('data', (c: Buffer) => {
        n += c.length;
      });
      r.resume();
      await new Promise((res) => r.on('end', res));
      expect(status).toBe(200);
      expect(n).toBe(BIG);
    } finally {
      s.close();
    }
  });

  it('answers HEAD without a body, and the gateway errors as HTTP/1.1 has them', async () => {
    const s = await h2connect(t.url);
    try {
      const head = await h2request(s, { ':path': '/open/h', ':method': 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.body.length).toBe(0);
      const dead = await h2request(s, { ':path': '/dead/x' });
      expect(dead.status).toBe(502);
      expect(JSON.parse(dead.text).error.type).toBe('upstream_unavailable');
      const none = await h2request(s, { ':path': '/nowhere' });
      expect(none.status).toBe(404);
      expect(none.headers.date).toBeDefined();
    } finally {
      s.close();
    }
  });

  it('a client that resets its stream before the answer: the origin is let go, the wake says 499, as on HTTP/1.1', async () => {
    const started = new Promise<void>((r) => {
      hangStarted = r;
    });
    const cut = new Promise<void>((r) => {
      hangCut = r;
    });
    const s = await h2connect(t.url);
    try {
      const r = s.request({ ':path': '/x/hang' });
      r.on('error', () => {});
      await started;
      r.close(http2.constants.NGHTTP2_CANCEL);
      // The origin's request is cut off at once, not answered a second later.
      await cut;
      let rows: { status: number }[] = [];
      for (const deadline = Date.now() + 5000; rows.length === 0 && Date.now() < deadline; ) {
        await flushed(t.gw);
        rows = (await t.gw.wakes.list({ environment: 'production', pathPattern: '^/x/hang$' }, 10, null)).rows;
      }
      expect(rows.map((w) => w.status)).toEqual([499]);
      // The session lives on.
      expect((await h2request(s, { ':path': '/open/after-reset' })).status).toBe(200);
    } finally {
      s.close();
    }
  });

  it('resets /v2 streams with HTTP_1_1_REQUIRED (the client retries on HTTP/1.1), and the session lives on', async () => {
    const s = await h2connect(t.url);
    try {
      const r = s.request({ ':path': '/v2/wakes', ...bearer(t.admin) });
      r.on('error', () => {});
      r.resume();
      const code = await new Promise<number>((res) => r.on('close', () => res(r.rstCode)));
      expect(code).toBe(http2.constants.NGHTTP2_HTTP_1_1_REQUIRED);
      expect((await h2request(s, { ':path': '/open/after' })).status).toBe(200);
    } finally {
      s.close();
    }
  });

  it('Expect: 100-continue: the body is invited only once admission passed', async () => {
    const s = await h2connect(t.url);
    try {
      const ask = (path: string, headers: Record<string, string>) =>
        new Promise<{ continued: boolean; status: number; text: string }>((resolve, reject) => {
          const r = s.request({ ':method': 'POST', ':path': path, expect: '100-continue', ...headers });
          let continued = false;
          let status = 0;
          const chunks: Buffer[] = [];
          r.on('continue', () => {
            continued = true;
            r.end('hello');
          });
          r.on('response', (h) => {
            status = Number(h[':status']);
            if (!continued) r.close();
          });
          r.on('data', (c: Buffer) => chunks.push(c));
          r.on('close', () => resolve({ continued, status, text: Buffer.concat(chunks).toString() }));
          r.on('error', reject);
        });
      const ok = await ask('/x/body', {});
      expect(ok).toMatchObject({ continued: true, status: 200, text: '5' });
      const refused = await ask('/pay/x', {});
      expect(refused.continued).toBe(false);
      expect(refused.status).toBe(401);
    } finally {
      s.close();
    }
  });

  it('a stop sends GOAWAY: the stream in flight finishes, the session takes no new one (last: it stops the gateway)', async () => {
    const s = await h2connect(t.url);
    const goaway = new Promise<number>((res) => s.once('goaway', (code: number) => res(code)));
    const slow = h2request(s, { ':path': '/x/slow' });
    await new Promise((r) => setTimeout(r, 50));
    const stopped = t.stop();
    expect(await goaway).toBe(http2.constants.NGHTTP2_NO_ERROR);
    const r = await slow;
    expect(r.status).toBe(200);
    expect(r.text).toBe('late');
    await stopped;
    const metrics = await t.gw.metrics.registry.getSingleMetricAsString('wakegate_h2_goaway_total');
    expect(metrics).toMatch(/reason="drain"} [1-9]/);
    s.destroy();
  });
});
