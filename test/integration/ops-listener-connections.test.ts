import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * A regression test (found by an attack review, since fixed). What it was (src/http-server.ts, f9bff0a): gatewayServer gives the ops listener and a
 * separate management listener the main listener's head size and timeouts, but not
 * server.max_connections (set on the edge only, src/edge.ts:119): either listener takes
 * any number of connections, each held up to headers_timeout_ms (or request_timeout_ms
 * with a trickled body), all of them descriptors of the control thread.
 */
let t: TestGateway;
beforeAll(async () => {
  t = await startGateway({ server: { max_connections: 3 }, management: { listener: 'separate', port: 0 } });
}, 60_000);
afterAll(async () => t?.cleanup(), 60_000);

/** Opens `n` connections that each send part of a head; how many the listener still holds after a moment. */
async function held(url: string, n: number): Promise<number> {
  const port = Number(new URL(url).port);
  const socks: net.Socket[] = [];
  for (let i = 0; i < n; i++) {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.on('connect', () => s.write('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: '));
    socks.push(s);
  }
  await new Promise((r) => setTimeout(r, 500));
  const open = socks.filter((s) => !s.destroyed && !s.readableEnded).length;
  for (const s of socks) s.destroy();
  return open;
}

describe('server.max_connections on the other listeners', () => {
  it('the main listener holds at most 3 (control)', async () => {
    expect(await held(t.url, 10)).toBeLessThanOrEqual(3);
  });
  for (const [name, url] of [
    ['the ops listener', () => t.opsUrl],
    ['a separate management listener', () => t.managementUrl],
  ] as const) {
    it(`${name} holds at most 3`, async () => {
      const n = await held(url(), 10);
      console.log({ name, held: n });
      expect(n).toBeLessThanOrEqual(3);
    });
  }
});
