// Regression tests from a review of tunnels and streams as an attacker (2026-11-27).
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { firstStatus, upgradeHead } from '../helpers/tunnels.js';

/**
 * FIXED (medium): `server.max_tunnels_per_client` counted tunnels by the connection's
 * address (`req.socket.remoteAddress` in src/proxy/websocket.ts), not by the client's
 * address that admission resolves behind `server.trusted_proxies`: behind a trusted load
 * balancer every client shared the balancer's one quota. Tunnels are now counted by the
 * client address admission reads (src/admission/client-address.ts: the one
 * X-Forwarded-For names behind a trusted proxy, the connection's otherwise).
 *
 * Expected (docs/configuration.md, `server.trusted_proxies`): "behind them, the client's
 * address (per-address limits, the wake's client_ip) is the one X-Forwarded-For names";
 * `max_tunnels_per_client` is "open tunnels per client address". Another client behind the
 * same proxy gets its own tunnels.
 */
describe('max_tunnels_per_client behind a trusted proxy', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const originSockets: net.Socket[] = [];
  const clients: net.Socket[] = [];

  beforeAll(async () => {
    origin = await startServer((_req, res) => res.end('plain'));
    origin.server.on('upgrade', (_req, socket: net.Socket) => {
      originSockets.push(socket);
      socket.on('error', () => {});
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    });
    t = await startGateway({
      // The "load balancer" connects from 127.0.0.9.
      server: { trusted_proxies: ['127.0.0.9'], max_tunnels_per_client: 2 },
      routes: [{ name: 'ws', prefix: '/ws', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    for (const s of [...clients, ...originSockets]) s.destroy();
    await t.cleanup();
    await origin.close();
  });

  const open = async (clientIp: string) => {
    const r = await firstStatus(port, upgradeHead('/ws/chat', `X-Forwarded-For: ${clientIp}\r\n`), '127.0.0.9');
    clients.push(r.socket);
    return r.status;
  };

  it('counts each client behind the proxy by its own address', async () => {
    // Client A takes its two.
    expect([await open('10.0.0.1'), await open('10.0.0.1')]).toEqual([101, 101]);
    // Control: A's third is refused, as documented.
    expect(await open('10.0.0.1')).toBe(503);
    // Client B, behind the same proxy, has opened nothing yet: its first tunnel must open.
    expect(await open('10.0.0.2')).toBe(101);
  });
});
