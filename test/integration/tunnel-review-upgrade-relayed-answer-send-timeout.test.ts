// Regression tests from a review of tunnels and streams as an attacker (2026-11-27).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { sleep, upgradeHead } from '../helpers/tunnels.js';

/**
 * FIXED (medium): an Upgrade request that the origin answers with an ordinary response
 * (not 101) was relayed by src/proxy/websocket.ts's 'response' path with none of the
 * bounds on slow readers (no `server.send_timeout_ms`, no
 * `max_streaming_downloads_per_client`): a client that added `Connection: Upgrade` /
 * `Upgrade: websocket` to a download and read nothing held the client connection and the
 * origin's for as long as it liked. Such an answer is now relayed by
 * src/proxy/relayed-answer.ts under the proxied answer's bounds (Downloads: the response
 * buffer and budget, the per-address streaming places, send_timeout_ms, its last bytes
 * included), and the origin connection is let go when the client is cut off.
 *
 * Expected (docs/configuration.md, `server.send_timeout_ms`): "a client that reads nothing
 * of its answer for this long is cut off", and its origin connection let go.
 */
describe('an upgrade answered with a plain 200, relayed to a client that reads nothing', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const closedAfter: Record<string, number> = {};

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const t0 = Date.now();
      const tag = req.headers.upgrade ? 'upgrade' : 'plain';
      res.on('close', () => {
        closedAfter[tag] = Date.now() - t0;
      });
      // 25 MB, written at the pace the gateway takes it.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const chunk = Buffer.alloc(64 * 1024, 1);
      let n = 0;
      const pump = () => {
        while (n < 400) {
          n++;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    t = await startGateway({
      server: { send_timeout_ms: 500 },
      routes: [{ name: 'dl', prefix: '/dl', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const stalled = (text: string): net.Socket => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.pause(); // reads nothing
    s.write(text);
    return s;
  };

  it('is cut after send_timeout_ms, as the same GET without the offer is', async () => {
    const plain = stalled('GET /dl/file HTTP/1.1\r\nHost: x\r\n\r\n');
    const upgrade = stalled(upgradeHead('/dl/file'));
    try {
      await sleep(3500);
      // Control: the plain GET's answer was cut (send_timeout_ms), letting go of the origin.
      expect(closedAfter.plain).toBeDefined();
      // Was the defect: the upgrade-flavoured GET was still held, with its origin connection.
      expect(closedAfter.upgrade, 'origin connection of the relayed answer still held').toBeDefined();
      expect(t.gw.tunnels.size).toBe(0);
    } finally {
      plain.destroy();
      upgrade.destroy();
    }
  });
});

describe('upgrades answered with a large plain 200, relayed to clients that read nothing', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  let open = 0;
  let closed = 0;
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    origin = await startServer((_req, res) => {
      open++;
      res.on('close', () => {
        open--;
        closed++;
      });
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const chunk = Buffer.alloc(64 * 1024, 1);
      let n = 0;
      const pump = () => {
        while (n < 400) {
          n++;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    t = await startGateway({
      server: { send_timeout_ms: 30_000, buffer_response_body_bytes: 65_536, max_streaming_downloads_per_client: 1 },
      routes: [{ name: 'dl', prefix: '/dl', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await t.cleanup();
    await origin.close();
  });

  it('stream past the response buffer at most max_streaming_downloads_per_client at once per address: the one past it is cut', async () => {
    for (let i = 0; i < 2; i++) {
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => {});
      s.pause();
      s.write(upgradeHead('/dl/file'));
      sockets.push(s);
    }
    // Long before send_timeout_ms: the second falls behind past the buffer with no place left, and is cut.
    await expect.poll(() => closed, { timeout: 5000 }).toBe(1);
    expect(open).toBe(1);
    for (const s of sockets) s.destroy();
    await expect.poll(() => open, { timeout: 3000 }).toBe(0);
    await expect.poll(() => t.gw.tunnels.size, { timeout: 3000 }).toBe(0);
  });
});
