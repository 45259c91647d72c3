// Regression tests from a review of the HTTP/2 edge (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2connect, h2request } from '../helpers/h2.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/**
 * docs/security.md: "A `Host` (HTTP/1.1) or `:authority` (HTTP/2) holding userinfo
 * (`user:pass@host`) is refused, 400 naming the field ... each recorded as a wake and drawn
 * from the address's `unauthenticated` bucket". docs/proxy.md: "Every response to a request
 * carries x-wake-id, except what the gateway refuses before a request exists". Over HTTP/1.1
 * it is so. Over HTTP/2 the edge's guard (h2/guards.ts malformedAnswer -> userinfoIn) answers
 * the 400 itself before the proxy: no x-wake-id (`"wake_id": null`), no wake, no rate-limit
 * fields, nothing drawn, so a client can send them without limit and unseen.
 */
describe('HTTP/2: :authority holding userinfo', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const wakesOf = async (path: string) => {
    await new Promise((r) => setTimeout(r, 100));
    await flushed(t.gw);
    return (await t.gw.wakes.list({ environment: 'production', pathPattern: `^${path}$` }, 10, null)).rows;
  };

  it('control: HTTP/1.1 Host with userinfo is 400 naming host, with its x-wake-id and a wake', async () => {
    const r = await rawExchange(port, 'GET /open/h1-userinfo HTTP/1.1\r\nHost: user:pass@localhost\r\n\r\n', 2000);
    expect(statusOf(r.text)).toBe(400);
    expect(r.text.toLowerCase()).toContain('x-wake-id: wk_');
    expect(r.text.toLowerCase()).toContain('x-ratelimit-limit');
    const rows = await wakesOf('/open/h1-userinfo');
    expect(rows.map((w) => w.status)).toEqual([400]);
  });

  it('HTTP/2 :authority with userinfo: 400 naming :authority, with its x-wake-id and a wake, drawn from the bucket', async () => {
    const s = await h2connect(t.url);
    try {
      const r = await h2request(s, { ':path': '/open/h2-userinfo', ':authority': 'user:pass@localhost' });
      expect(r.status).toBe(400);
      const error = JSON.parse(r.text).error;
      expect(error.param).toBe(':authority');
      // Observed: no x-wake-id, "wake_id": null, no rate-limit fields, and no wake stored.
      expect(String(r.headers['x-wake-id'])).toMatch(/^wk_/);
      expect(error.wake_id).toBe(r.headers['x-wake-id']);
      expect(r.headers['x-ratelimit-limit']).toBeDefined();
    } finally {
      s.close();
    }
    const rows = await wakesOf('/open/h2-userinfo');
    expect(rows.map((w) => [w.status, w.protocol])).toEqual([[400, 'h2']]);
  });
});
