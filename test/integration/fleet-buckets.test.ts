import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import type { Wake } from '../../src/capture/wake.js';
import { loadConfig } from '../../src/config/index.js';
import type { EventSink } from '../../src/events/bus.js';
import { sloRules } from '../../src/events/slo.js';
import { Coordinator } from '../../src/fleet/redis.js';
import { createLogger } from '../../src/log.js';
import { createMetrics, registerCoordination } from '../../src/metrics/index.js';
import type { QuotaWarning } from '../../src/ratelimit/limiter.js';
import { fleetOnRedis, storage } from '../helpers/fleet.js';
import { keyRecord } from '../helpers/keys.js';
import { startRedis } from '../helpers/redis.js';
import { wakeRow } from '../helpers/wakes.js';

/** Two limiters (two instances' worth: each its own connection) on one real redis-server. */
const fleet = fleetOnRedis();
const instance = (values: Record<string, unknown> = {}, onWarning?: (w: QuotaWarning) => void) =>
  fleet.instance({ values, ...(onWarning ? { onWarning } : {}) });

const key = (id: string, rl: KeyRecord['rate_limit']): KeyRecord => keyRecord(id, 'production', rl);

describe('buckets and once-per-fleet events through Redis', () => {
  it('admit exactly a bucket between two instances deciding at once', async () => {
    const [a, b] = [await instance(), await instance()];
    const k = key('exact', { limit: 1, burst: 50, window: 'day' });
    const all = await Promise.all(
      Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? b : a).limiter.check(k, '', null, Date.now())),
    );
    expect(all.filter((d) => d.allowed)).toHaveLength(50);
    const refused = all.find((d) => !d.allowed);
    expect(refused?.retryAfter).toBeGreaterThan(60);
  });

  it('take from a route policy and the key all or nothing, and give back what a stopped instance did not spend', async () => {
    const rate_limits = { reports: { limit: 1, burst: 5, window: 'day' } };
    const a = await instance({ rate_limits });
    const k = key('both', { limit: 1, burst: 100, window: 'day' });
    const ds = [];
    for (let i = 0; i < 20; i++) ds.push(await a.limiter.check(k, '', 'reports', Date.now()));
    expect(ds.filter((d) => d.allowed)).toHaveLength(5);
    expect(ds.at(-1)?.policy).toBe('reports');
    await a.limiter.stop();
    const tok = Number(await fleet.redis().cli('HGET', 'wakegate:wg:b:k:both', 'tok'));
    const out = Number(await fleet.redis().cli('HGET', 'wakegate:wg:b:k:both', 'out'));
    // The key's bucket gave 5; what its leases held beyond them came back, and none is held now.
    expect(Math.floor(tok + 1e-6)).toBe(95);
    expect(out).toBe(0);
  });

  it('raise each quota warning once for the fleet', async () => {
    const warnings: QuotaWarning[] = [];
    const heard = (w: QuotaWarning) => void warnings.push(w);
    const [a, b] = [await instance({}, heard), await instance({}, heard)];
    const k = key('quota', { limit: 10, burst: 100, window: 'hour' });
    for (let i = 0; i < 12; i++) await (i % 2 ? a : b).limiter.check(k, '', null, Date.now());
    await Promise.all([a.limiter.sweep(), b.limiter.sweep()]);
    expect(warnings.map((w) => w.threshold).sort()).toEqual([0.8, 0.95]);
  });

  it('cost a fraction of a round trip per decision on a busy key', async () => {
    const a = await instance();
    const k = key('busy', { limit: 1_000_000, burst: 1_000_000, window: 'second' });
    for (let i = 0; i < 2000; i++) {
      const d = a.limiter.check(k, '', null, Date.now());
      expect((d instanceof Promise ? await d : d).allowed).toBe(true);
    }
    const trips = (await a.metrics.coordinationRoundTrips.get()).values.find((v) => v.labels.op === 'take')?.value ?? 0;
    expect(trips).toBeLessThan(2000 / 16);
  });

  it('follow on_unavailable when Redis answers slower than timeout_ms, without waiting for it, and count it', async () => {
    const open = await fleet.instance({ coordination: { timeout_ms: 50, on_unavailable: 'open' } });
    const closed = await fleet.instance({ coordination: { timeout_ms: 50, on_unavailable: 'closed' } });
    const k = key('slow', { limit: 1, burst: 10, window: 'day' });
    // Asleep for a second; the decisions come 200 ms in (redis-cli can take a while to start on a loaded host).
    const sleeping = fleet.redis().cli('DEBUG', 'SLEEP', '1');
    await new Promise((r) => setTimeout(r, 200));
    const t0 = performance.now();
    const [a, b] = await Promise.all([
      open.limiter.check(k, '', null, Date.now()),
      closed.limiter.check(k, '', null, Date.now()),
    ]);
    const waited = performance.now() - t0;
    await sleeping;
    expect(a.allowed).toBe(true);
    expect(b).toMatchObject({ allowed: false, unavailable: true });
    expect(waited).toBeLessThan(400);
    const counted = await open.metrics.coordinationUnavailable.get();
    expect(counted.values.find((v) => v.labels.outcome === 'admitted')?.value).toBe(1);
  });

  it('raise slo.burn once for the fleet when two instances see the same burn', async () => {
    const [a, b] = [await instance(), await instance()];
    const cfg = loadConfig({ values: { storage, coordination: { redis_url: fleet.redis().url } } });
    const raised: string[] = [];
    const sink = (who: string): EventSink => ({
      emit(type, environment, data) {
        raised.push(`${who}:${type}`);
        return { id: 'evt', type, environment, created_at: 0, data };
      },
    });
    const route = cfg.routes[0]?.name as string;
    const rulesA = sloRules(cfg, sink('a'), (name, ttl) => a.co.once(name, ttl));
    const rulesB = sloRules(cfg, sink('b'), (name, ttl) => b.co.once(name, ttl));
    // 2% errors on each, against a 0.1% budget: both see a burn of 20.
    const t0 = Date.now();
    for (const rules of [rulesA, rulesB]) {
      for (let i = 0; i < 500; i++) rules.row(sloWake(route, i % 50 === 0 ? 503 : 200, t0 + i));
      rules.end();
    }
    await new Promise((r) => setTimeout(r, 100));
    expect(raised.filter((x) => x.endsWith('slo.burn'))).toHaveLength(1);
  });
});

describe('the coordination connection', () => {
  it('subscribes to its channels once Redis is up, though it was down when the gateway started', async () => {
    const r = await startRedis();
    await r.stop();
    const metrics = createMetrics({ process: false });
    registerCoordination(metrics);
    const co = new Coordinator({ url: r.url, timeoutMs: 200, log: createLogger('silent'), metrics });
    try {
      await co.start(200);
      const got: string[] = [];
      await co.subscribe('wg:test', (m) => got.push(m));
      expect(co.ready).toBe(false);
      await r.start();
      const until = Date.now() + 5000;
      while (got.length === 0 && Date.now() < until) {
        if (co.ready) await co.command(['PUBLISH', 'wg:test', 'hello'], 'publish').catch(() => {});
        await new Promise((res) => setTimeout(res, 100));
      }
      expect(got[0]).toBe('hello');
    } finally {
      await co.close();
      await r.stop();
    }
  });
});

const sloWake = (route: string, status: number, t: number): Wake =>
  wakeRow({ id: `wk_${t}`, route, status, captured_at: t });
