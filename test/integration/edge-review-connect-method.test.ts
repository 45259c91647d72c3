// Regression tests from a review of tunnels and streams as an attacker (2026-11-27).
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/**
 * DEFECT (low, fixed): a well-formed `CONNECT host:port HTTP/1.1` was handed by Node to the
 * server's 'connect' event, which nothing listened to, so Node destroyed the socket: no
 * answer at all, no error body, no wake. A client or a monitoring probe could not tell a
 * refused CONNECT from a crashed gateway, and nothing recorded it. Now every listener
 * (src/http-server.ts) serves it as the request it is: its target is no path, so it is
 * refused as a target that is no path (docs/proxy.md): 400 `invalid_request`, `param: "path"`,
 * in the documented error body, with its `x-wake-id` and a wake; a CONNECT to a path is no
 * valid request (RFC 9112 §3.2.3): 400 `malformed request`. Over HTTP/2 a CONNECT stream is
 * reset with HTTP_1_1_REQUIRED (as /v2 is), so a client retries on HTTP/1.1 and gets the 400.
 */
describe('CONNECT on the main listener', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const seen: string[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.end('plain');
    });
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [{ name: 'open', prefix: '/', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('is answered with the documented error body, not a silent close', async () => {
    const r = await rawExchange(port, 'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n', 1500);
    const status = statusOf(r.text);
    expect(status, `answer: ${JSON.stringify(r.text)}`).toBeGreaterThanOrEqual(400);
    expect(status).toBeLessThan(500);
    expect(r.text).toMatch(/"error":\{"type":"[a-z_]+","message":/);
  });

  it('is refused as a target that is no path is: 400 invalid_request, with its wake id and wake', async () => {
    const r = await rawExchange(port, 'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\nSSH-2.0-x\r\n', 1500);
    expect(statusOf(r.text)).toBe(400);
    expect(r.text).toContain('"type":"invalid_request"');
    expect(r.text).toContain('"param":"path"');
    const id = /x-wake-id: (wk_\w+)/i.exec(r.text)?.[1];
    expect(id, r.text).toBeDefined();
    expect(r.text).toContain(`"wake_id":"${id}"`);
    // An absolute-form target is served (RFC 9112 §3.2.2, http-request-target.test.ts); CONNECT's is never read as one.
    const absolute = await rawExchange(port, 'CONNECT http://127.0.0.1:22/ HTTP/1.1\r\nHost: x\r\n\r\n', 1500);
    expect(statusOf(absolute.text)).toBe(400);
    expect(absolute.text).toContain('"param":"path"');
    await flushed(t.gw);
    const page = await t.gw.wakes.list({ environment: 'production', method: 'CONNECT' }, 10, null);
    expect(page.rows.map((w) => w.id)).toContain(id);
    expect(seen).toEqual([]);
  });

  it('to a path is malformed: 400, never forwarded', async () => {
    const r = await rawExchange(port, 'CONNECT /x HTTP/1.1\r\nHost: x\r\n\r\n', 1500);
    expect(statusOf(r.text)).toBe(400);
    expect(r.text).toContain('"message":"malformed request"');
    expect(r.closed).toBe(true);
    expect(seen).toEqual([]);
  });

  it('on the ops listener is answered too', async () => {
    const r = await rawExchange(
      Number(new URL(t.opsUrl).port),
      'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n',
      1500,
    );
    expect(statusOf(r.text)).toBeGreaterThanOrEqual(400);
    expect(statusOf(r.text)).toBeLessThan(500);
    expect(r.text).toMatch(/"error":\{"type":"[a-z_]+","message":/);
  });

  it('over HTTP/2 is reset with HTTP_1_1_REQUIRED (on HTTP/1.1 it is answered 400)', async () => {
    const session = http2.connect(t.url);
    session.on('error', () => {});
    try {
      const code = await new Promise<number>((resolve) => {
        const stream = session.request({ ':method': 'CONNECT', ':authority': '127.0.0.1:22' });
        stream.on('error', () => {});
        stream.on('response', () => resolve(-1));
        stream.on('close', () => resolve(stream.rstCode ?? -1));
      });
      expect(code).toBe(http2.constants.NGHTTP2_HTTP_1_1_REQUIRED);
    } finally {
      session.close();
    }
    expect(seen).toEqual([]);
  });
});
