import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * A regression test (found by an attack review, since fixed). What it was (upgrade-offer.ts): an offer pipelined behind a keep-alive request waits for
 * that request's answer (busy.once('finish')) before serve() lends the connection to the
 * TunnelSet. Meanwhile the socket is neither the HTTP server's (its parser was freed at
 * 'upgrade', so closeAllConnections does not see it) nor lent (tunnels.destroyAll does
 * not see it): a clean stop's forced end at the grace misses it, and the stop waits on
 * the origin instead.
 */
const OFFER = 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n';

describe('a clean stop with an offer pipelined behind a slow request', () => {
  let origin: TestServer;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      // Far past the grace and the bound below: a stop that waits on it is told from one slowed by a loaded host.
      const timer = setTimeout(() => res.end('slow'), 20_000);
      res.on('close', () => clearTimeout(timer));
    });
  });
  afterAll(async () => origin.close());

  for (const pipelined of [false, true]) {
    it(`ends the connection at the grace (1 s)${pipelined ? ' with the offer behind' : ' (control: no offer)'}`, async () => {
      const t = await startGateway({
        routes: [{ name: 'public', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      });
      try {
        const s = net.connect(Number(new URL(t.url).port), '127.0.0.1');
        s.on('error', () => {});
        s.write(
          `GET /open/slow HTTP/1.1\r\nHost: x\r\n\r\n${pipelined ? `GET /open/next HTTP/1.1\r\nHost: x\r\n${OFFER}\r\n` : ''}`,
        );
        await new Promise((r) => setTimeout(r, 300));
        const t0 = Date.now();
        await t.gw.stop(1000);
        const took = Date.now() - t0;
        console.log({ pipelined, stopMs: took });
        s.destroy();
        // The grace (1 s) and the close of the store; a stop waiting on the origin takes 20 s.
        expect(took).toBeLessThan(8000);
      } finally {
        await t.cleanup();
      }
    }, 30_000);
  }
});
