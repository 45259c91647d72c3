// Regression tests from a review of tunnels and streams as an attacker (2026-11-27).
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';
import { upgradeHead } from '../helpers/tunnels.js';

/**
 * FIXED (low-medium): an origin that answers a WebSocket handshake with a `101 Switching
 * Protocols` lacking `Upgrade`/`Connection: upgrade` is not seen by Node's client as a
 * switch, and src/proxy/websocket.ts relayed it down its ordinary-answer path: the client
 * was sent a 101 with no Upgrade and `connection: close`, and the wake recorded a tunnel
 * that never was. A 101 must name its protocol (RFC 9110 §15.2.2): such an answer is now
 * a 502 `upstream_unavailable`, as a 101 naming another protocol is, and the wake says 502.
 *
 * Expected (docs/proxy.md): "Only an origin's 101 with the Upgrade asked for makes a
 * tunnel … an origin switching protocols unasked is a 502": 502 `upstream_unavailable`
 * in the documented error body, as for a 101 naming another protocol.
 */
describe('an origin that answers 101 without an Upgrade field', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    origin = await startServer((_req, res) => res.end('plain'));
    origin.server.on('upgrade', (_req, socket: net.Socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      socket.write('HTTP/1.1 101 Switching Protocols\r\n\r\nframes');
    });
    t = await startGateway({
      routes: [{ name: 'ws', prefix: '/ws', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await t.cleanup();
    await origin.close();
  });

  it('is answered 502 upstream_unavailable, and the wake says 502', async () => {
    const r = await rawExchange(port, upgradeHead('/ws/chat'), 1500);
    expect(statusOf(r.text), `answer: ${JSON.stringify(r.text.slice(0, 200))}`).toBe(502);
    expect(r.text).toContain('"type":"upstream_unavailable"');
    await flushed(t.gw);
    const page = await t.gw.wakes.list({ environment: 'production', pathPattern: '^/ws/chat$' }, 10, null);
    expect(page.rows[0]?.status).toBe(502);
  });
});
