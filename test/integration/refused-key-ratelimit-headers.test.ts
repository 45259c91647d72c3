import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Regression tests from a review of the product against its design contract (2026-11-27).

/**
 * A request whose key is refused (missing, malformed, unknown, revoked) draws from its
 * address's `unauthenticated` bucket, and a limited answer says how that bucket stands
 * (docs/keys-and-limits.md: the rate-limit headers on every limited answer). The 401s
 * carried none: a client could not tell it was being counted until its 429.
 */
describe('401s of refused keys carry the unauthenticated bucket’s headers', () => {
  let origin: TestServer;
  let t: TestGateway;
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 12, 0, 0));
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end('{}');
    });
    t = await startGateway(
      {
        rate_limits: { unauthenticated: { limit: 2, burst: 2, window: 'minute' } },
        routes: [
          {
            name: 'api',
            prefix: '/api',
            scopes: { read: 'api:read', write: 'api:write' },
            origins: { production: origin.url },
          },
        ],
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it.each([
    ['the proxy', '/api/x'],
    ['/v2', '/v2/wakes'],
  ])('through %s: 401, 401 counting down, then 429', async (_, path) => {
    const seen: { status: number; limit: string | null; remaining: string | null; reset: string | null }[] = [];
    // Both cases come from one address: a minute later its bucket is full again.
    clock.advance(60_000);
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${t.url}${path}`, { headers: { authorization: `Bearer svc_live_${'u'.repeat(40)}${i}` } });
      await r.arrayBuffer();
      seen.push({
        status: r.status,
        limit: r.headers.get('x-ratelimit-limit'),
        remaining: r.headers.get('x-ratelimit-remaining'),
        reset: r.headers.get('x-ratelimit-reset'),
      });
    }
    expect(seen.map((s) => s.status)).toEqual([401, 401, 429]);
    expect(seen.map((s) => s.limit)).toEqual(['2', '2', '2']);
    expect(seen.map((s) => s.remaining)).toEqual(['1', '0', '0']);
    for (const s of seen) expect(Number(s.reset)).toBeGreaterThan(0);
  });
});
