// Regression tests from a review of tunnels and streams as an attacker (2026-11-27).
import https from 'node:https';
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';
import { upgradeHead } from '../helpers/tunnels.js';

/**
 * FIXED (low): on the upgrade path the route's `timeout_ms` was passed to node:http as the
 * socket's idle timeout, so an origin that trickled its answer head (a byte every 150 ms,
 * never finishing the header block) held the handshake, the client and a tunnel place for
 * as long as it trickled. The handshake now has a plain request's deadlines
 * (src/proxy/origin-client.ts): connected within `connect_timeout_ms`, then the whole
 * answer head within `timeout_ms` (504 `upstream_timeout`), however it trickles.
 *
 * Expected (docs/proxy.md): "Origin too slow (no response headers within the route's
 * timeout_ms …): 504 upstream_timeout". WebSocket upgrades "pass the same checks as any
 * request".
 */
describe('an origin that trickles its 101 header block', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    const trickle = (socket: net.Socket, status: string) => {
      sockets.push(socket);
      socket.on('error', () => {});
      socket.write(`HTTP/1.1 ${status}\r\nX-Slow: `);
      let i = 0;
      const drip = setInterval(() => {
        if (socket.destroyed || i++ > 60) return clearInterval(drip);
        socket.write('x');
      }, 150);
    };
    // The same trickle for a plain request (the control) and for the handshake.
    origin = await startServer((req) => trickle(req.socket, '200 OK'));
    origin.server.on('upgrade', (_req, socket: net.Socket) => trickle(socket, '101 Switching Protocols'));
    t = await startGateway({
      routes: [{ name: 'ws', prefix: '/ws', auth: 'none', timeout_ms: 1000, origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await t.cleanup();
    await origin.close();
  });

  it('is answered 504 upstream_timeout about timeout_ms after the request', async () => {
    // Control: a plain GET to the same trickling origin is a 504 after timeout_ms.
    const plain = await rawExchange(port, 'GET /ws/plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 4000);
    expect(statusOf(plain.text)).toBe(504);
    const r = await rawExchange(port, upgradeHead('/ws/chat'), 4000);
    expect(statusOf(r.text), `after ${r.ms} ms: ${JSON.stringify(r.text.slice(0, 120))}`).toBe(504);
    expect(r.ms).toBeLessThan(3000);
  });
});

describe('an https origin: connect_timeout_ms until it is connected (TLS too), then timeout_ms for the head', () => {
  let certs: TestCerts;
  let origin: https.Server;
  let t: TestGateway;
  let port: number;
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    certs = makeCerts();
    const pair = certs.make('origin', 'origin.test', ['DNS:origin.test']);
    origin = https.createServer({ cert: pair.certPem, key: pair.keyPem }, (_req, res) => res.end('plain'));
    origin.on('upgrade', (req, socket: net.Socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      if (req.url === '/tls/slow') {
        // Past connect_timeout_ms, within timeout_ms: the connection is up, so this is in time.
        setTimeout(
          () => socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n'),
          700,
        );
      } else {
        socket.write('HTTP/1.1 101 Switching Protocols\r\nX-Slow: ');
        const drip = setInterval(() => (socket.destroyed ? clearInterval(drip) : socket.write('x')), 150);
      }
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    const url = `https://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    t = await startGateway({
      routes: [
        {
          name: 'tls',
          prefix: '/tls',
          auth: 'none',
          connect_timeout_ms: 400,
          timeout_ms: 1500,
          tls: { ca: certs.ca, servername: 'origin.test' },
          origins: { production: url },
        },
      ],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await t?.cleanup();
    origin?.closeAllConnections();
    await new Promise((r) => origin?.close(r));
    certs?.cleanup();
  });

  it('a 101 after connect_timeout_ms but within timeout_ms makes the tunnel; a trickled head is a 504', async () => {
    const slow = await rawExchange(port, upgradeHead('/tls/slow'), 1500);
    expect(statusOf(slow.text), JSON.stringify(slow.text.slice(0, 200))).toBe(101);
    const trickled = await rawExchange(port, upgradeHead('/tls/trickle'), 4000);
    expect(statusOf(trickled.text), JSON.stringify(trickled.text.slice(0, 200))).toBe(504);
    expect(trickled.ms).toBeLessThan(3000);
  });
});
