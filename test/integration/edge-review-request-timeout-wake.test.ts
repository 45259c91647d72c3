// Regression tests from a review of tunnels and streams as an attacker (2026-11-27).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * DEFECT (low, fixed): a request cut by `server.request_timeout_ms` (the client still sending,
 * slowly) was answered 408 by the edge, but its wake said 499 ("client closed request") and
 * the 408 carried no `x-wake-id` (its body said `"wake_id": null`) although the request existed
 * and had a wake. Now the proxy, which reads the body, answers the 408 itself
 * (src/request-timeout.ts): with the wake's id in `x-wake-id` and in the body, and the wake
 * says 408, whether the body was being buffered or streamed to an origin that had not
 * answered yet. docs/configuration.md: "`server.request_timeout_ms` … a request whose body has
 * not arrived by then is cut off (408)"; docs/proxy.md: "Every response to a request carries
 * x-wake-id, except what the gateway refuses before a request exists".
 */
describe('a slow upload cut by request_timeout_ms', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const originClosed: string[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      res.on('close', () => originClosed.push(req.url ?? ''));
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      server: { request_timeout_ms: 1500, headers_timeout_ms: 1000 },
      routes: [{ name: 'up', prefix: '/up', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  /** Sends `head` (and `first`), then a byte every 100 ms; resolves with what came back once closed (or after 5 s). */
  const slowUpload = async (head: string, first?: Buffer): Promise<string> => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    let text = '';
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1');
    });
    const closed = new Promise((r) => s.on('close', r));
    s.write(head);
    if (first) s.write(first);
    const drip = setInterval(() => s.write('b'), 100);
    await Promise.race([closed, sleep(5000)]);
    clearInterval(drip);
    s.destroy();
    return text;
  };

  const wakeOf = async (path: string) => {
    await sleep(100);
    await flushed(t.gw);
    const page = await t.gw.wakes.list({ environment: 'production', pathPattern: `^${path}$` }, 10, null);
    expect(page.rows).toHaveLength(1);
    return page.rows[0];
  };

  it('is answered 408 with its wake id, and its wake says 408', async () => {
    const text = await slowUpload('POST /up/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\n');
    expect(text.startsWith('HTTP/1.1 408')).toBe(true);
    const wake = await wakeOf('/up/slow');
    expect(wake?.status, 'the wake says the client went away').toBe(408);
    const id = wake?.id.toLowerCase();
    expect(text.toLowerCase()).toContain(`x-wake-id: ${id}`);
    expect(text).toContain(`"wake_id":"${wake?.id}"`);
    expect(text).toMatch(/"error":\{"type":"invalid_request","message":"request timed out/);
    expect(text.toLowerCase()).toContain('connection: close');
  });

  it('streamed to an origin that has not answered: 408 with its wake id, and the origin let go', async () => {
    // Past buffer_request_body_bytes (1 MiB): the body streams to the origin as it comes.
    const text = await slowUpload(
      'POST /up/streamed HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n',
      Buffer.alloc(1100 * 1024, 97),
    );
    expect(statusOf(text)).toBe(408);
    const wake = await wakeOf('/up/streamed');
    expect(wake?.status).toBe(408);
    expect(text.toLowerCase()).toContain(`x-wake-id: ${wake?.id.toLowerCase()}`);
    expect(originClosed).toContain('/up/streamed');
  });

  it('a head too slow is still refused before a request exists: 408, no wake id', async () => {
    const r = await rawExchange(port, 'POST /up/head HTTP/1.1\r\nHost: x\r\n', 4000);
    expect(statusOf(r.text)).toBe(408);
    expect(r.text).toContain('"wake_id":null');
    expect(r.text.toLowerCase()).not.toContain('x-wake-id');
  });
});
