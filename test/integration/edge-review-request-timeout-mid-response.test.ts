// Regression tests from a review of tunnels and streams as an attacker (2026-11-27).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * DEFECT (medium, fixed): when `server.request_timeout_ms` ran out on a request whose answer
 * was already being sent (a streamed upload to an origin that answers as it reads: an echo,
 * a transcoder, a bidirectional stream), src/http-server.ts's `answerMalformed` wrote a whole
 * `HTTP/1.1 408 Request Timeout` response onto the socket in the middle of the 200's chunked
 * body, corrupting the client's framing. Now, as Node's own clientError handler does once an
 * answer's head is written, the connection is only cut (RFC 9112 §9.3 / RFC 9110 §15: one
 * response per request), and the request's wake says 408: the proxy, which reads the body,
 * is told of the timeout (src/request-timeout.ts) and records it.
 */
describe('request_timeout_ms on a streamed upload whose answer is already streaming', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      // Answers at once, then echoes the body as it streams in.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      req.on('data', (c) => res.write(c));
      req.on('end', () => res.end());
    });
    t = await startGateway({
      server: { request_timeout_ms: 1500, headers_timeout_ms: 1000 },
      routes: [
        { name: 'echo', prefix: '/echo', auth: 'none', origins: { production: origin.url } },
        {
          name: 'keyed',
          prefix: '/keyed',
          auth: 'required',
          scopes: { read: 'k:read', write: 'k:write' },
          origins: { production: origin.url },
        },
      ],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('cuts the connection without writing a second response into the first; the wake says 408', async () => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    const chunks: Buffer[] = [];
    s.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise((r) => s.on('close', r));
    // Past buffer_request_body_bytes (1 MiB): the body streams to the origin, which answers at once.
    s.write('POST /echo/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n');
    s.write(Buffer.alloc(1100 * 1024, 97));
    const drip = setInterval(() => s.write('b'.repeat(100)), 100);
    await Promise.race([closed, sleep(5000)]);
    clearInterval(drip);
    const cut = s.destroyed;
    s.destroy();
    const text = Buffer.concat(chunks).toString('latin1');
    expect(text.startsWith('HTTP/1.1 200')).toBe(true);
    // The defect was a second status line inside the 200's body.
    expect(text.indexOf('HTTP/1.1 408', 12), 'a 408 response written inside the 200 response').toBe(-1);
    expect(cut, 'the connection was cut').toBe(true);
    await sleep(100);
    await flushed(t.gw);
    const page = await t.gw.wakes.list({ environment: 'production', pathPattern: '^/echo/x$' }, 10, null);
    expect(page.rows).toHaveLength(1);
    expect(page.rows[0]?.status, 'the wake says what cut it').toBe(408);
  });

  it('a request answered whole while its body still arrives gets no second answer when it times out', async () => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    let text = '';
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1');
    });
    const closed = new Promise((r) => s.on('close', r));
    // Refused (no key) at its head, answered at once; its body keeps coming until request_timeout_ms.
    s.write('POST /keyed/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\n');
    const drip = setInterval(() => s.write('b'), 100);
    await Promise.race([closed, sleep(5000)]);
    clearInterval(drip);
    s.destroy();
    expect(text.startsWith('HTTP/1.1 401')).toBe(true);
    expect(text.indexOf('HTTP/1.1 408'), 'a 408 after the 401 to the same request').toBe(-1);
  });
});
