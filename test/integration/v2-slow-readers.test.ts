import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * A /v2 answer on the main listener (threads: 1: answered in this thread) to clients
 * that never read it: a caller with wakes:read asking for a large wake detail on many
 * connections holds nothing past server.send_timeout_ms.
 */
const BODY = 6 * 1_048_576;
const SEND_TIMEOUT = 500;

describe('/v2 answers to clients that never read (through the main listener)', () => {
  let gw: TestGateway;
  let origin: TestServer;
  let wakeId: string;

  beforeAll(async () => {
    const text = 'hello, world. ';
    const big = Buffer.from(text.repeat(Math.ceil(BODY / text.length)).slice(0, BODY));
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(big);
    });
    gw = await startGateway({
      server: { send_timeout_ms: SEND_TIMEOUT, buffer_response_body_bytes: 16_777_216 },
      capture: { detail: { max_body_bytes: 16_777_216, max_bytes_per_second: 1_073_741_824 } },
      routes: [{ name: 'big', prefix: '/big', auth: 'none', origins: { production: origin.url } }],
    });
    const r = await fetch(`${gw.url}/big/x`);
    expect((await r.arrayBuffer()).byteLength).toBe(BODY);
    await flushed(gw.gw);
    const list = await call(gw.url, gw.admin, 'GET', '/v2/wakes?limit=10');
    const wake = (list.body.data as { id: string; route: string }[]).find((w) => w.route === 'big');
    expect(wake).toBeDefined();
    wakeId = (wake as { id: string }).id;
  }, 60_000);
  afterAll(async () => {
    await gw?.cleanup();
    await origin?.close();
  });

  it('10 connections asking for a large wake detail and reading nothing are cut after send_timeout_ms', async () => {
    // The whole answer once, read as fast as this process can: on a loaded host even this
    // reader can fall send_timeout_ms behind and be cut (the rule under test), so it tries again.
    let size = 0;
    for (let i = 0; i < 5 && size === 0; i++) {
      try {
        const whole = await fetch(`${gw.url}/v2/wakes/${wakeId}`, { headers: { authorization: `Bearer ${gw.admin}` } });
        size = (await whole.arrayBuffer()).byteLength;
      } catch {
        // Cut while reading: read again.
      }
    }
    expect(size).toBeGreaterThan(BODY);
    const port = Number(new URL(gw.url).port);
    const clients = Array.from({ length: 10 }, () => {
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => {});
      s.pause();
      // One read started, so the first bytes are seen (as readableLength) without reading on.
      s.on('connect', () => s.read(0));
      s.write(`GET /v2/wakes/${wakeId} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${gw.admin}\r\n\r\n`);
      return s;
    });
    // The answers have begun (each is a 6 MiB detail read from the store: on a loaded host
    // that alone can take longer than the wait below, and an answer not yet begun cannot be
    // cut), then nothing is read for several send timeouts (the rule is the gateway's, not a
    // guess at speed).
    const begun = async () => {
      const end = performance.now() + 30_000;
      while (!clients.every((s) => s.readableLength > 0 || s.destroyed)) {
        if (performance.now() > end) return false;
        await new Promise((r) => setTimeout(r, 25));
      }
      return true;
    };
    expect(await begun()).toBe(true);
    await new Promise((r) => setTimeout(r, SEND_TIMEOUT * 6));
    const got = await Promise.all(
      clients.map(
        (s) =>
          new Promise<number>((resolve) => {
            let n = 0;
            s.on('data', (c: Buffer) => {
              n += c.length;
            });
            s.on('close', () => resolve(n));
            s.resume();
            setTimeout(() => {
              s.destroy();
              resolve(n);
            }, 15_000);
          }),
      ),
    );
    // Each was cut: what the kernel buffers held, never the whole answer.
    for (const n of got) expect(n).toBeLessThan(size);
  }, 60_000);
});
