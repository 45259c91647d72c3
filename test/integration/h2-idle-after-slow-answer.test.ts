import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2connect, h2request } from '../helpers/h2.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// An HTTP/2 session is closed once idle for keep_alive_timeout_ms. Node's session.setTimeout
// calls its callback once: when the idle timer ran out while a stream was open (an origin
// slower than keep_alive_timeout_ms), the check found a stream open and did nothing, and the
// session was never closed afterwards, however long it stayed idle: a client could hold a
// connection (and its descriptor) for ever after one slow answer.
describe('an HTTP/2 session idle after an answer slower than keep_alive_timeout_ms', () => {
  let origin: TestServer;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      setTimeout(() => res.end('slow'), 1_200);
    });
    t = await startGateway({
      server: { http2: 'h2c', keep_alive_timeout_ms: 400, headers_timeout_ms: 1_000, request_timeout_ms: 1_000 },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it('is closed within a few idle periods of its last answer', async () => {
    const s = await h2connect(t.url);
    s.on('error', () => {});
    const closed = new Promise<number>((resolve) => s.once('close', () => resolve(Date.now())));
    const r = await h2request(s, { ':method': 'GET', ':path': '/open/slow' });
    expect(r.status).toBe(200);
    const answered = Date.now();
    const at = await Promise.race([closed, new Promise<number>((resolve) => setTimeout(() => resolve(-1), 4_000))]);
    s.destroy();
    expect(at, 'the session was still open 4 s after its last answer').not.toBe(-1);
    expect(at - answered).toBeLessThan(2_000);
  });

  it('is closed after the gateway resets a request whose body never ended (request_timeout_ms)', async () => {
    const s = await h2connect(t.url);
    s.on('error', () => {});
    const closed = new Promise<number>((resolve) => s.once('close', () => resolve(Date.now())));
    const started = Date.now();
    const r = s.request({ ':method': 'POST', ':path': '/open/upload' });
    r.on('error', () => {});
    r.write('part of a body that never ends');
    const reset = await new Promise<number>((resolve) => r.once('close', () => resolve(r.rstCode)));
    expect(reset).not.toBe(0);
    const at = await Promise.race([closed, new Promise<number>((resolve) => setTimeout(() => resolve(-1), 4_000))]);
    s.destroy();
    expect(at, 'the session was still open 4 s after its stream was reset').not.toBe(-1);
    expect(at - started).toBeLessThan(3_500);
  });
});
