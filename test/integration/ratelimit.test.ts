import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { EventTable } from '../../src/store/events.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

describe('rate limits through the gateway', () => {
  let origin: TestServer;
  let hits = 0;
  let t: TestGateway;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));

  beforeAll(async () => {
    origin = await startServer((_req, res) => {
      hits++;
      res.end('ok');
    });
    t = await startGateway(
      {
        routes: [
          {
            name: 'pay',
            prefix: '/pay',
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
          { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        ],
        rate_limits: { reports: { limit: 600, burst: 3, window: 'minute' } },
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('a key with {limit: 60, burst: 10}: 10 at once, honest 429s, then one a second; every 429 is a wake', async () => {
    const { key, secret } = await t.gw.keys.create(
      {
        label: 'limited',
        environment: 'production',
        scopes: ['payments:read'],
        rate_limit: { limit: 60, burst: 10, window: 'minute' },
      },
      'production',
    );
    const before = hits;
    const statuses: number[] = [];
    for (let i = 0; i < 15; i++) {
      const r = await fetch(`${t.url}/pay/x`, { headers: bearer(secret) });
      statuses.push(r.status);
      if (r.status === 429) {
        expect(r.headers.get('retry-after')).toBe('1');
        expect(r.headers.get('x-ratelimit-remaining')).toBe('0');
        expect(r.headers.get('x-ratelimit-limit')).toBe('60');
        const body = await r.json();
        expect(body.error).toMatchObject({ type: 'rate_limit_exceeded', retry_after: 1 });
      } else {
        expect(r.headers.get('x-ratelimit-limit')).toBe('60');
        expect(r.headers.get('ratelimit-policy')).toBe('"key";q=60;w=60');
        await r.arrayBuffer();
      }
    }
    expect(statuses).toEqual([...Array(10).fill(200), ...Array(5).fill(429)]);
    expect(hits - before).toBe(10);
    // retry-after said 1 s: at 999 ms still refused, at 1 s exactly one passes.
    clock.advance(999);
    expect((await fetch(`${t.url}/pay/x`, { headers: bearer(secret) })).status).toBe(429);
    for (let s = 1; s <= 3; s++) {
      clock.set(Date.UTC(2026, 10, 22, 12, 0, 0) + s * 1000);
      expect((await fetch(`${t.url}/pay/x`, { headers: bearer(secret) })).status).toBe(200);
      expect((await fetch(`${t.url}/pay/x`, { headers: bearer(secret) })).status).toBe(429);
    }
    await flushed(t.gw);
    const page = await (
      await fetch(`${t.url}/v2/wakes?key_id=${key.id}&status=429&limit=100`, { headers: bearer(t.admin) })
    ).json();
    expect(page.data).toHaveLength(9);
    const metrics = await (await fetch(`${t.opsUrl}/metrics`)).text();
    expect(metrics).toMatch(/wakegate_rate_limited_total\{policy="key"\} 9/);
    expect(metrics).toMatch(/wakegate_ratelimit_buckets \d+/);
  });

  it('a route with its own policy draws from both buckets and never charges on a refusal', async () => {
    const { secret } = await t.gw.keys.create(
      { label: 'rep', environment: 'production', scopes: ['reports:read', 'payments:read'] },
      'production',
    );
    const s = [];
    for (let i = 0; i < 5; i++) s.push((await fetch(`${t.url}/reports/daily`, { headers: bearer(secret) })).status);
    expect(s).toEqual([200, 200, 200, 429, 429]);
    const r = await fetch(`${t.url}/pay/x`, { headers: bearer(secret) });
    expect(r.headers.get('x-ratelimit-remaining')).toBe(String(9000 - 3 - 1));
  });

  it('limits /v2 calls by the key too, with the headers', async () => {
    const r = await fetch(`${t.url}/v2/wakes?limit=1`, { headers: bearer(t.admin) });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-ratelimit-limit')).toBe('6000');
    expect(Number(r.headers.get('x-ratelimit-remaining'))).toBeLessThan(9000);
  });

  it('raises consumer.quota.warning at 80% and 95%, once each, into the events table', async () => {
    const { key, secret } = await t.gw.keys.create(
      {
        label: 'quota',
        environment: 'production',
        scopes: ['payments:read'],
        rate_limit: { limit: 20, burst: 40, window: 'minute' },
      },
      'production',
    );
    for (let i = 0; i < 25; i++) await (await fetch(`${t.url}/pay/q`, { headers: bearer(secret) })).arrayBuffer();
    await t.gw.events.flush();
    // Under the manual clock both share one millisecond, so order them by threshold.
    const ev = (await new EventTable(t.gw.store).list({ type: 'consumer.quota.warning' }))
      .filter((e) => e.data.key_id === key.id)
      .sort((a, b) => Number(a.data.threshold) - Number(b.data.threshold));
    expect(ev.map((e) => [e.data.threshold, e.data.used])).toEqual([
      [0.8, 16],
      [0.95, 19],
    ]);
    expect(ev[0]?.data).toMatchObject({ consumer: 'quota', limit: 20, window: 'minute' });
  });
});
