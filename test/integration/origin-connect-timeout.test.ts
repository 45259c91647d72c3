import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * routes[].connect_timeout_ms: a new connection to the origin (with an https origin's
 * handshake) must be up in time, else 502 naming the setting. It was a fixed 10 s,
 * whatever the route's timeout_ms: an origin that accepted connections and never
 * answered held each request that long.
 */
describe("a route's connect timeout", () => {
  let silent: net.Server;
  const held: net.Socket[] = [];
  let t: TestGateway;

  beforeAll(async () => {
    // Takes TCP connections and never answers: a TLS client's handshake never completes.
    silent = net.createServer((s) => {
      held.push(s);
      s.on('error', () => {});
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as net.AddressInfo).port;
    t = await startGateway({
      routes: [
        {
          name: 'stalls',
          prefix: '/stalls',
          auth: 'none',
          connect_timeout_ms: 300,
          origins: { production: `https://127.0.0.1:${port}` },
        },
      ],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    for (const s of held) s.destroy();
    await new Promise((r) => silent.close(r));
  });

  it('is 502 upstream_unavailable naming the setting, once it has passed', async () => {
    const t0 = performance.now();
    const r = await fetch(`${t.url}/stalls/x`);
    const ms = performance.now() - t0;
    expect(r.status).toBe(502);
    const body = (await r.json()) as { error: { type: string; message: string } };
    expect(body.error.type).toBe('upstream_unavailable');
    expect(body.error.message).toContain('routes[].connect_timeout_ms (300 ms)');
    expect(ms).toBeGreaterThanOrEqual(250);
    // Far below the 10 s it always was.
    expect(ms).toBeLessThan(5_000);
  });

  it('is 10 s unless a route says otherwise', () => {
    const cfg = loadConfig({
      values: { routes: [{ name: 'a', prefix: '/a', auth: 'none', origins: { production: 'http://127.0.0.1:1' } }] },
      env: { DATA_DIR: '/tmp/unused' },
    });
    expect(cfg.routes[0]?.connect_timeout_ms).toBe(10_000);
  });
});
