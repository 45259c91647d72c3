import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2connect, h2request } from '../helpers/h2.js';
import { echoOrigin, startServer, type TestServer } from '../helpers/origin.js';

/**
 * HTTP/2 requests with a body, answered whole: recorded with the origin's status and
 * never counted as client resets. (Node ends an h2 stream once its request body is read
 * and its answer written, before the answer's 'finish'; a POST was recorded 499 and
 * counted against max_resets_per_10s, so a client that POSTed a few hundred times in
 * ten seconds was sent GOAWAY.)
 */
describe('HTTP/2 POSTs answered whole', () => {
  let origin: TestServer;
  let big: TestServer;
  let huge: TestServer;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await echoOrigin('prod');
    big = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 60_000 });
        res.end(Buffer.alloc(60_000, 7));
      });
    });
    huge = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 200_000 });
        res.end(Buffer.alloc(200_000, 7));
      });
    });
    t = await startGateway({
      server: {
        http2: 'h2c',
        http2_limits: { max_concurrent_streams: 100, max_header_list_bytes: 65_536, max_resets_per_10s: 20 },
      },
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        { name: 'big', prefix: '/big', auth: 'none', origins: { production: big.url } },
        { name: 'huge', prefix: '/huge', auth: 'none', origins: { production: huge.url } },
      ],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
    await big.close();
    await huge.close();
  });

  it('records the origin status, and many on one session are never taken for resets', async () => {
    const s = await h2connect(t.url);
    let goaway = -1;
    s.on('goaway', (code) => {
      goaway = code;
    });
    try {
      const ids: string[] = [];
      // Past max_resets_per_10s (20) several times over, sequentially and in parallel.
      for (let i = 0; i < 30; i++) {
        const r = await h2request(s, { ':path': `/open/p${i}`, 'content-type': 'text/plain' }, `body ${i}`);
        expect(r.status).toBe(200);
        ids.push(r.headers['x-wake-id'] as string);
      }
      const many = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          h2request(s, { ':path': `/open/q${i}`, ':method': 'PUT' }, Buffer.alloc(2000 + i, 1)),
        ),
      );
      expect(many.map((r) => r.status)).toEqual(many.map(() => 200));
      expect(goaway).toBe(-1);
      await flushed(t.gw);
      const w = await (await fetch(`${t.url}/v2/wakes/${ids[0]}`, { headers: bearer(t.admin) })).json();
      expect(w).toMatchObject({ protocol: 'h2', method: 'POST', status: 200 });
      const last = await (
        await fetch(`${t.url}/v2/wakes/${many[29]?.headers['x-wake-id']}`, { headers: bearer(t.admin) })
      ).json();
      expect(last).toMatchObject({ method: 'PUT', status: 200 });
    } finally {
      s.close();
    }
  });

  it('an answer past the stream window (200 KB, a 64 KB window), read whole, is recorded 200', async () => {
    const s = await h2connect(t.url);
    const ids: string[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const r = await h2request(s, { ':method': 'POST', ':path': `/huge/p${i}` }, 'body');
        expect(r.status).toBe(200);
        expect(r.body.length).toBe(200_000);
        ids.push(r.headers['x-wake-id'] as string);
      }
    } finally {
      s.close();
    }
    await flushed(t.gw);
    for (const id of ids) {
      let w: { status?: number } = {};
      for (let i = 0; i < 100 && w.status === undefined; i++) {
        const res = await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) });
        if (res.status === 200) w = await res.json();
        else await new Promise((r) => setTimeout(r, 20));
      }
      expect(w.status).toBe(200);
    }
  });

  it("a reset with CANCEL while the answer waits on the client's flow control is a 499", async () => {
    // A 1 KB window: the 60 KB answer cannot leave whole before the client resets.
    const s = http2.connect(t.url, { settings: { initialWindowSize: 1024 } });
    try {
      const id = await new Promise<string>((resolve, reject) => {
        const r = s.request({ ':method': 'POST', ':path': '/big/x' });
        r.on('response', (h) => {
          resolve(h['x-wake-id'] as string);
          r.close(http2.constants.NGHTTP2_CANCEL);
        });
        r.on('error', reject);
        r.end('body');
      });
      await flushed(t.gw);
      let w: { status?: number } = {};
      for (let i = 0; i < 100 && w.status === undefined; i++) {
        const res = await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) });
        if (res.status === 200) w = await res.json();
        else await new Promise((r) => setTimeout(r, 20));
      }
      expect(w.status).toBe(499);
    } finally {
      s.close();
    }
  });
});
