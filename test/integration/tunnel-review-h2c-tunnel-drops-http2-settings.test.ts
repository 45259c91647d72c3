// Regression tests from a review of tunnels and streams as an attacker (2026-11-27).
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange } from '../helpers/raw.js';

/**
 * FIXED (low): on a route that lists `h2c` in `routes[].upgrades`, the handshake reached
 * the origin without its `HTTP2-Settings` field (dropped as hop-by-hop by
 * src/proxy/headers.ts) and with `Connection: upgrade` only, so a conforming h2c origin
 * (RFC 7540 §3.2.1: "MUST NOT upgrade ... if this header field is not present"; Go's
 * x/net/http2/h2c checks both) never switched. A tunnel to h2c now passes the client's one
 * HTTP2-Settings (base64url, holding no gateway key) named in `Connection`; for any other
 * protocol, and on a declined offer, the field is still dropped.
 *
 * Expected (docs/configuration.md): "A route that lists `h2c` in `routes[].upgrades`
 * tunnels it to its origin" — the origin must be offered a valid h2c upgrade:
 * `HTTP2-Settings` passed on and named in `Connection`.
 */
describe('an h2c upgrade on a route that lists h2c', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const seen: Record<string, string | string[] | undefined>[] = [];
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    origin = await startServer((_req, res) => res.end('plain'));
    origin.server.on('upgrade', (req, socket: net.Socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      seen.push(req.headers);
      socket.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n');
    });
    t = await startGateway({
      routes: [{ name: 'h', prefix: '/h', auth: 'none', upgrades: ['h2c'], origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await t.cleanup();
    await origin.close();
  });

  it('reaches the origin with its HTTP2-Settings, named in Connection', async () => {
    await rawExchange(
      port,
      'GET /h/x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n',
      1000,
    );
    expect(seen).toHaveLength(1);
    expect(seen[0]?.upgrade).toBe('h2c');
    expect(seen[0]?.['http2-settings']).toBe('AAMAAABkAARAAAAAAAIAAAAA');
    expect(String(seen[0]?.connection).toLowerCase()).toContain('http2-settings');
  });
});
