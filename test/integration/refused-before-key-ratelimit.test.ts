// Regression tests: requests refused before any key is read are limited per address (2026-11-27).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { metric } from '../helpers/tracing.js';

/**
 * A request refused before its key is read (no route matches its path, an unsafe path,
 * a gateway key in its URL, a Host with userinfo) was answered and stored as a wake
 * with no bucket drawn: one address could send them without end, each one a wake, a
 * flood of storage the `unauthenticated` policy exists to stop for refused keys. They
 * now draw from the same per-address bucket; past it, 429 with its headers, and only
 * a sample of them stored (all counted). A key's own traffic on a route is untouched.
 */
describe('refusals before the key draw from the address’s unauthenticated bucket', () => {
  let origin: TestServer;
  let t: TestGateway;
  let key = '';
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 12, 0, 0));
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end('{}');
    });
    t = await startGateway(
      {
        rate_limits: { unauthenticated: { limit: 3, burst: 3, window: 'minute' } },
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
    key = (await t.gw.keys.create({ label: 'k', environment: 'production', scopes: ['api:read'] }, 'production'))
      .secret;
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const send = async (path: string, headers: Record<string, string> = {}) => {
    const r = await fetch(`${t.url}${path}`, { headers });
    await r.arrayBuffer();
    return { status: r.status, remaining: r.headers.get('x-ratelimit-remaining'), retry: r.headers.get('retry-after') };
  };

  it.each([
    ['no route', '/nowhere', 404],
    ['an unsafe path', '/api/a%2F..%2Fb', 400],
    ['a key in the URL', `/api/x?token=svc_live_${'k'.repeat(43)}`, 400],
  ])('%s: refused thrice, then 429 with Retry-After', async (_, path, status) => {
    clock.advance(60_000);
    const seen = [];
    for (let i = 0; i < 5; i++) seen.push(await send(path));
    expect(seen.map((s) => s.status)).toEqual([status, status, status, 429, 429]);
    expect(seen.map((s) => s.remaining)).toEqual(['2', '1', '0', '0', '0']);
    expect(Number(seen[3]?.retry)).toBeGreaterThan(0);
  });

  it('past the bucket, most refusals are counted, not stored; a key on its route still passes', async () => {
    clock.advance(60_000);
    const before = await metric(t.opsUrl, 'wakegate_wakes_sampled_out_total');
    const statuses: number[] = [];
    for (let i = 0; i < 50; i++) statuses.push((await send('/nowhere')).status);
    expect(statuses.filter((s) => s === 429).length).toBe(47);
    const after = await metric(t.opsUrl, 'wakegate_wakes_sampled_out_total');
    expect(after - before).toBeGreaterThanOrEqual(45);
    // The same address's keyed request on a route is never refused for others' refusals (a NAT).
    expect((await send('/api/ok', { authorization: `Bearer ${key}` })).status).toBe(200);
  });
});
