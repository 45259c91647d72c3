import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * A regression test (found by an attack review, since fixed). What it was (upgrade-offer.ts): a declined offer's answer is written by a ServerResponse
 * on a socket Node's HTTP server has let go of at 'upgrade', which took its 'drain'
 * listener (socketOnDrain, the one that emits 'drain' on socket._httpMessage) with it.
 * An answer larger than the socket's buffer waits for a 'drain' that never comes, and
 * the client, reading as fast as it can, is cut after send_timeout_ms with part of it.
 */
const OFFER = 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n';
const TOTAL = 128 * 64 * 1024; // 8 MiB

describe('a large answer to a declined offer, read as fast as it comes', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      const chunk = Buffer.alloc(64 * 1024, 120);
      let left = TOTAL / chunk.length;
      res.writeHead(200, { 'content-length': String(TOTAL) });
      const more = () => {
        while (left > 0) {
          left--;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      res.on('error', () => {});
      more();
    });
    t = await startGateway({
      server: { send_timeout_ms: 1500 },
      routes: [{ name: 'public', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  /** Reads everything the gateway sends on one connection: bytes of body, and how long. */
  const fetchRaw = (path: string, extra: string) =>
    new Promise<{ body: number; ms: number }>((resolve) => {
      const t0 = Date.now();
      const s = net.connect(port, '127.0.0.1');
      const parts: Buffer[] = [];
      s.on('data', (c: Buffer) => parts.push(c));
      s.on('error', () => {});
      s.on('close', () => {
        const all = Buffer.concat(parts);
        resolve({ body: all.length - (all.indexOf('\r\n\r\n') + 4), ms: Date.now() - t0 });
      });
      s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${extra}\r\n`);
    });

  it('without the offer: all of it (control)', async () => {
    expect((await fetchRaw('/open/plain', '')).body).toBe(TOTAL);
  });

  it('with an h2c offer: all of it too, and the wake says 200', async () => {
    const r = await fetchRaw('/open/offered', OFFER);
    await flushed(t.gw);
    const wake = (await t.gw.wakes.list({ environment: 'production', pathPattern: '^/open/offered$' }, 1, null))
      .rows[0];
    console.log({ received: r.body, of: TOTAL, ms: r.ms, wakeStatus: wake?.status });
    expect(r.body).toBe(TOTAL);
    expect(wake?.status).toBe(200);
  });
});
