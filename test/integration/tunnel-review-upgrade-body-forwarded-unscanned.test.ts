// Regression tests from a review of tunnels and streams as an attacker (2026-11-27).
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKeySecret } from '../../src/auth/secrets.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';
import { upgradeHead } from '../helpers/tunnels.js';

/**
 * FIXED (medium, security): an Upgrade request with a body (Content-Length or chunked)
 * on a route that takes the upgrade was sent to the origin with its Content-Length, and
 * its body bytes written into the tunnel once the origin said 101, never looked at: a
 * gateway key in that body reached the origin (the proxy refuses the same body on the
 * same route without the Upgrade, 400). A handshake has no body (RFC 6455 §4.1), and the
 * gateway does not search tunnel bytes: such a request is now refused after admission and
 * before the origin is asked, 400 `invalid_request` with `param` naming the field that
 * gave it a body (`content-length`, `transfer-encoding`). Fuzzed in upgrade-offer-fuzz.
 *
 * Expected (docs/security.md): "A gateway key … never reaches an origin in any spelling
 * … A URL or body that carries one is refused (400)"; and docs/proxy.md refuses an
 * upgrade request with a body (400 `invalid_request`, `param` naming `Content-Length` or
 * `Transfer-Encoding`) rather than forward its bytes under another framing.
 */
describe('an Upgrade request with a body, on a route that tunnels websocket', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const originGot: string[] = [];
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      let b = '';
      req.on('data', (c) => {
        b += c;
      });
      req.on('end', () => {
        originGot.push(b);
        res.end('ok');
      });
    });
    origin.server.on('upgrade', (_req, socket: net.Socket, head: Buffer) => {
      sockets.push(socket);
      socket.on('error', () => {});
      originGot.push(head.toString('latin1'));
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
      socket.on('data', (c: Buffer) => originGot.push(c.toString('latin1')));
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

  it('a gateway key in the body never reaches the origin: refused 400', async () => {
    const key = newKeySecret('live');
    const body = JSON.stringify({ token: key });
    // Control: the same body without the Upgrade is refused and never forwarded.
    const plain = await rawExchange(
      port,
      `POST /ws/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      1500,
    );
    expect(statusOf(plain.text)).toBe(400);
    expect(originGot.join('')).not.toContain(key);

    const r = await rawExchange(
      port,
      upgradeHead('/ws/chat', `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n`) + body,
      1500,
    );
    expect(originGot.join(''), 'the origin received the gateway key').not.toContain(key);
    expect(statusOf(r.text)).toBe(400);
    expect(r.text).toContain('"type":"invalid_request"');
    expect(r.text).toContain('"param":"content-length"');

    // Chunked, the same: refused before the origin is asked, naming Transfer-Encoding.
    const chunked = await rawExchange(
      port,
      `${upgradeHead('/ws/chat', 'Transfer-Encoding: chunked\r\n')}${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
      1500,
    );
    expect(statusOf(chunked.text)).toBe(400);
    expect(chunked.text).toContain('"param":"transfer-encoding"');
    expect(originGot).toEqual([]);
  });
});
