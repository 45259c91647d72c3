// Regression tests from a review of rate limiting (2026-11-28).
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * A policy's name is written into every answer's RateLimit-Policy and RateLimit headers
 * as a quoted string: a name holding `"`, `\`, a line break or a character outside ASCII
 * made a header Node refuses to write. It is refused when the config loads, with the
 * name's path, as route names are.
 */
describe('rate limit policy names', () => {
  let origin: TestServer | null = null;
  let t: TestGateway | null = null;
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it('that no header can carry are refused at load, naming the policy', () => {
    for (const name of ['a"b', 'プラン', 'a\\b', 'free tier', 'a\nb', '']) {
      expect(
        () => loadConfig({ values: { rate_limits: { [name]: { limit: 1, burst: 1, window: 'minute' } } } }),
        JSON.stringify(name),
      ).toThrow(/rate_limits/);
    }
  });

  it('that a header can carry are served and named in the headers', async () => {
    origin = await startServer((_req, res) => res.end('ok'));
    t = await startGateway({
      routes: [
        { name: 'pub', prefix: '/pub', auth: 'none', rate_limit: 'tier.free-1', origins: { production: origin.url } },
      ],
      rate_limits: { 'tier.free-1': { limit: 5, burst: 5, window: 'minute' } },
    });
    const r = await fetch(`${t.url}/pub/x`);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('ok');
    expect(r.headers.get('ratelimit-policy')).toContain('"tier.free-1";q=5;w=60');
  });
});
