import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { descriptorWarning, tunnelBound } from '../../src/proxy/descriptors.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/** Issue #25, items 3 and 10: only listed protocols tunnel, and tunnels are bounded. */
describe('tunnels', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  let key: string;
  const upgrades: string[] = [];

  beforeAll(async () => {
    // An origin that switches to whatever is asked (as hypercorn does for h2c), then echoes.
    origin = await startServer((_req, res) => res.end('plain'));
    origin.server.on('upgrade', (req, socket) => {
      upgrades.push(`${req.headers.upgrade} ${req.url}`);
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${req.headers.upgrade}\r\n\r\n`,
      );
      socket.on('data', (c: Buffer) => socket.write(c));
      // A half-close from the gateway is answered by closing: the tunnel then ends both ways.
      socket.on('end', () => socket.end());
      socket.on('error', () => {});
    });
    t = await startGateway({
      server: { max_tunnels: 3, max_tunnels_per_client: 2 },
      routes: [
        {
          name: 'h2',
          prefix: '/h2',
          scopes: { read: 'h2:read', write: 'h2:write' },
          origins: { production: origin.url },
        },
        {
          name: 'both',
          prefix: '/both',
          auth: 'none',
          upgrades: ['websocket', 'h2c'],
          origins: { production: origin.url },
        },
        { name: 'ws', prefix: '/ws', auth: 'none', origins: { production: origin.url } },
      ],
    });
    port = Number(new URL(t.url).port);
    const r = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'h2', environment: 'production', scopes: ['h2:read'] }),
    });
    key = ((await r.json()) as { secret: string }).secret;
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('an h2c upgrade on a route that lists only websocket is refused, and the origin never sees it', async () => {
    const r = await rawExchange(
      port,
      `GET /h2/x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nAuthorization: Bearer ${key}\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`,
    );
    expect(statusOf(r.text)).toBe(400);
    expect(r.text).toContain('routes[].upgrades: websocket');
    expect(upgrades.filter((u) => u.startsWith('h2c'))).toEqual([]);
  });

  it('a route that lists h2c tunnels it', async () => {
    const r = await rawExchange(
      port,
      'GET /both/x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n',
      500,
    );
    expect(statusOf(r.text)).toBe(101);
    expect(upgrades).toContain('h2c /both/x');
  });

  /** Opens a WebSocket-style tunnel from a given loopback address; resolves with the status line's code. */
  const open = (from: string): Promise<{ status: number; socket: net.Socket }> =>
    new Promise((resolve) => {
      const s = net.connect({ port, host: '127.0.0.1', localAddress: from });
      s.on('error', () => {});
      let text = '';
      s.on('data', (c: Buffer) => {
        text += c.toString('latin1');
        if (text.includes('\r\n\r\n')) resolve({ status: statusOf(text), socket: s });
      });
      s.write('GET /ws/chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    });

  it('bounds tunnels per client address and in all (503 past either), and frees them when they close', async () => {
    // The tunnel of the test before is let go once its close reaches the gateway.
    await expect.poll(() => t.gw.tunnels.size, { timeout: 2000 }).toBe(0);
    const a1 = await open('127.0.0.1');
    const a2 = await open('127.0.0.1');
    const a3 = await open('127.0.0.1');
    expect([a1.status, a2.status, a3.status]).toEqual([101, 101, 503]);
    const b1 = await open('127.0.0.2');
    const b2 = await open('127.0.0.2');
    expect([b1.status, b2.status]).toEqual([101, 503]);
    // The gateway's bound (3) holds for every address together.
    const c1 = await open('127.0.0.3');
    expect(c1.status).toBe(503);
    a1.socket.destroy();
    await new Promise((r) => setTimeout(r, 50));
    const c2 = await open('127.0.0.3');
    expect(c2.status).toBe(101);
    for (const s of [a2, a3, b1, b2, c1, c2]) s.socket.destroy();
  });

  it('holds tunnels below the descriptor limit, and says so at start', () => {
    expect(tunnelBound(10_000, 1024)).toBe(384);
    expect(tunnelBound(100, 1024)).toBe(100);
    expect(tunnelBound(100, null)).toBe(100);
    expect(descriptorWarning({ max_connections: 20_000, max_tunnels: 10_000 }, 1024)).toMatch(
      /may open 1024 files.*server\.max_connections.*server\.max_tunnels.*held to 384/,
    );
    expect(descriptorWarning({ max_connections: 100, max_tunnels: 10 }, 1_048_576)).toBeNull();
    // Issue #36: the defaults under a limit of 20,000 (common in containers) leave room for
    // thousands of clients and tunnels: no warning at every start, only where the limit bites.
    const defaults = { max_connections: 20_000, max_tunnels: 10_000, upstream_connections: 512 };
    expect(descriptorWarning(defaults, 20_000)).toBeNull();
    expect(descriptorWarning(defaults, 4096)).toMatch(/may open 4096 files/);
    const small = { max_connections: 500, max_tunnels: 100, upstream_connections: 64 };
    expect(descriptorWarning(small, 1024)).toBeNull();
    expect(descriptorWarning({ ...small, max_connections: 900 }, 1024)).toMatch(/1024 files/);
  });
});
