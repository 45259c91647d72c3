import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { EventTable } from '../../src/store/events.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

// Regression and coverage tests from a review of admission and forwarded headers (the defects' tests failed before their fixes).
describe('review: rate-limit edges with an injected clock', () => {
  let origin: TestServer;
  let t: TestGateway;
  const clock = new ManualClock(T0);

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      if (req.url?.startsWith('/own')) {
        // An origin with its own limiter, answering with its own headers.
        res.setHeader('x-ratelimit-limit', '100');
        res.setHeader('x-ratelimit-remaining', '99');
        res.setHeader('x-ratelimit-reset', '3600');
      }
      res.end('ok');
    });
    t = await startGateway(
      {
        routes: [
          {
            name: 'pay',
            prefix: '/pay',
            scopes: { read: 'payments:read', write: 'payments:write' },
            origins: { production: origin.url, sandbox: origin.url },
          },
          {
            name: 'own',
            prefix: '/own',
            scopes: { read: 'payments:read', write: 'payments:write' },
            origins: { production: origin.url },
          },
          {
            name: 'reports',
            prefix: '/reports',
            scopes: { read: 'reports:read', write: 'reports:write' },
            rate_limit: 'reports',
            origins: { production: origin.url },
          },
        ],
        rate_limits: { reports: { limit: 60, burst: 2, window: 'minute' } },
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const get = async (path: string, secret: string) => {
    const r = await fetch(`${t.url}${path}`, { headers: bearer(secret) });
    const text = await r.text();
    return { r, status: r.status, text };
  };

  it('held up: burst then refill: Retry-After is the true wait, never 0, and the next request at it passes', async () => {
    clock.set(T0);
    const { secret } = await t.gw.keys.create(
      {
        label: 'burst-edge',
        environment: 'production',
        scopes: ['payments:read'],
        rate_limit: { limit: 6, burst: 3, window: 'minute' },
      },
      'production',
    );
    const s: number[] = [];
    for (let i = 0; i < 3; i++) s.push((await get('/pay/a', secret)).status);
    expect(s).toEqual([200, 200, 200]);
    const refused = await get('/pay/a', secret);
    expect(refused.status).toBe(429);
    // One token every 10 s.
    expect(refused.r.headers.get('retry-after')).toBe('10');
    expect(JSON.parse(refused.text).error.retry_after).toBe(10);
    expect(refused.r.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(refused.r.headers.get('x-ratelimit-reset')).toBe('30');
    clock.advance(9_999);
    const early = await get('/pay/a', secret);
    expect(early.status).toBe(429);
    expect(early.r.headers.get('retry-after')).toBe('1');
    clock.advance(1);
    const ok = await get('/pay/a', secret);
    expect(ok.status).toBe(200);
    expect(ok.r.headers.get('x-ratelimit-remaining')).toBe('0');
    // Full again after 30 s: 3 pass, the fourth is refused.
    clock.advance(30_000);
    const again: number[] = [];
    for (let i = 0; i < 4; i++) again.push((await get('/pay/a', secret)).status);
    expect(again).toEqual([200, 200, 200, 429]);
  });

  it('held up: a scheduled revocation refuses exactly from revoke_at on', async () => {
    clock.set(T0 + 3_600_000);
    const { key, secret } = await t.gw.keys.create(
      { label: 'sched', environment: 'production', scopes: ['payments:read'] },
      'production',
    );
    const at = clock.now() + 60_000;
    await t.gw.keys.revoke(key.id, 'production', at);
    clock.set(at - 1);
    expect((await get('/pay/x', secret)).status).toBe(200);
    clock.set(at);
    const r = await get('/pay/x', secret);
    expect(r.status).toBe(401);
    expect(JSON.parse(r.text).error.type).toBe('key_revoked');
  });

  it('held up: a route policy refusal charges nothing from the key bucket, and the 429 names the binding bucket', async () => {
    clock.set(T0 + 2 * 3_600_000);
    const { secret } = await t.gw.keys.create(
      {
        label: 'rep-edge',
        environment: 'production',
        scopes: ['reports:read', 'payments:read'],
        rate_limit: { limit: 60, burst: 10, window: 'minute' },
      },
      'production',
    );
    const s: number[] = [];
    for (let i = 0; i < 3; i++) s.push((await get('/reports/d', secret)).status);
    expect(s).toEqual([200, 200, 429]);
    const p = await get('/pay/x', secret);
    expect(p.status).toBe(200);
    // 10 - 2 (reports) - 1 (this one)
    expect(p.r.headers.get('x-ratelimit-remaining')).toBe('7');
  });

  it('held up: sandbox keys share one bucket', async () => {
    clock.set(T0 + 3 * 3_600_000);
    const a = await t.gw.keys.create({ label: 'sb-a', environment: 'sandbox', scopes: ['payments:read'] }, 'sandbox');
    const b = await t.gw.keys.create({ label: 'sb-b', environment: 'sandbox', scopes: ['payments:read'] }, 'sandbox');
    const r1 = await get('/pay/x', a.secret);
    const r2 = await get('/pay/x', b.secret);
    expect(r1.status).toBe(200);
    expect(r2.status).toBe(200);
    expect(Number(r2.r.headers.get('x-ratelimit-remaining'))).toBe(
      Number(r1.r.headers.get('x-ratelimit-remaining')) - 1,
    );
  });

  it("the client sees the gateway's x-ratelimit-* once, not beside an origin's own", async () => {
    clock.set(T0 + 4 * 3_600_000);
    const { secret } = await t.gw.keys.create(
      {
        label: 'own-hdrs',
        environment: 'production',
        scopes: ['payments:read'],
        rate_limit: { limit: 60, burst: 5, window: 'minute' },
      },
      'production',
    );
    const r = await get('/own/x', secret);
    expect(r.status).toBe(200);
    // DESIGN.md: x-ratelimit-limit is the binding policy's limit; a client must be able to read one value.
    expect(r.r.headers.get('x-ratelimit-limit')).toBe('60');
    expect(r.r.headers.get('x-ratelimit-remaining')).toBe('4');
    expect(r.r.headers.get('x-ratelimit-reset')).toBe('1');
  });

  it('held up: a 429 of the route bucket names it, and Retry-After is the longer wait when both refuse', async () => {
    clock.set(T0 + 5 * 3_600_000);
    const { secret } = await t.gw.keys.create(
      {
        label: 'two-buckets',
        environment: 'production',
        scopes: ['reports:read'],
        rate_limit: { limit: 2, burst: 3, window: 'minute' },
      },
      'production',
    );
    expect((await get('/reports/a', secret)).status).toBe(200);
    expect((await get('/reports/a', secret)).status).toBe(200);
    const r = await get('/reports/a', secret);
    expect(r.status).toBe(429);
    // reports: 60/min, burst 2, empty: 1 s for a token; the key has one token left.
    expect(r.r.headers.get('x-ratelimit-limit')).toBe('60');
    expect(r.r.headers.get('retry-after')).toBe('1');
    clock.advance(1000);
    expect((await get('/reports/a', secret)).status).toBe(200);
    clock.advance(1000);
    const both = await get('/reports/a', secret);
    expect(both.status).toBe(429);
    // key: 2/min (a token per 30 s), 2/30 of a token left -> 28 s; reports has one token.
    expect(both.r.headers.get('x-ratelimit-limit')).toBe('2');
    expect(both.r.headers.get('retry-after')).toBe('28');
    clock.advance(27_999);
    expect((await get('/reports/a', secret)).status).toBe(429);
    clock.advance(1);
    expect((await get('/reports/a', secret)).status).toBe(200);
  });

  it('held up: a flood of bad keys from one address never refuses a valid key from it', async () => {
    clock.set(T0 + 6 * 3_600_000);
    const { secret } = await t.gw.keys.create(
      { label: 'nat', environment: 'production', scopes: ['payments:read'] },
      'production',
    );
    const bad = `svc_live_${'A'.repeat(43)}`;
    let last = 0;
    for (let i = 0; i < 601; i++) last = (await get('/pay/x', bad)).status;
    expect(last).toBe(429);
    expect((await get('/pay/x', secret)).status).toBe(200);
  });

  it('held up: a day-window quota warning fires once per UTC day, again after midnight', async () => {
    const midnight = Date.UTC(2026, 10, 24);
    clock.set(midnight - 1);
    const { key, secret } = await t.gw.keys.create(
      {
        label: 'daily',
        environment: 'production',
        scopes: ['payments:read'],
        rate_limit: { limit: 10, burst: 100, window: 'day' },
      },
      'production',
    );
    for (let i = 0; i < 9; i++) expect((await get('/pay/d', secret)).status).toBe(200);
    clock.set(midnight);
    for (let i = 0; i < 8; i++) expect((await get('/pay/d', secret)).status).toBe(200);
    await t.gw.events.flush();
    const ev = (await new EventTable(t.gw.store).list({ type: 'consumer.quota.warning' }))
      .filter((e) => e.data.key_id === key.id)
      .map((e) => [e.data.threshold, e.data.used, e.data.window])
      .sort();
    expect(ev).toEqual([
      [0.8, 8, 'day'],
      [0.8, 8, 'day'],
    ]);
  });
});
