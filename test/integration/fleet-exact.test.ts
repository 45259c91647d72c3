import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { Heartbeat } from '../../src/fleet/alive.js';
import type { FleetLimiter } from '../../src/fleet/buckets.js';
import { Coordinator, type Reply } from '../../src/fleet/redis.js';
import { GIVE, TAKE } from '../../src/fleet/scripts.js';
import { createLogger } from '../../src/log.js';
import { createMetrics, registerCoordination } from '../../src/metrics/index.js';
import type { LimitDecision } from '../../src/ratelimit/types.js';
import { fleetOnRedis, hammer as hammerFleet, settle } from '../helpers/fleet.js';
import { keyRecord } from '../helpers/keys.js';
import { startRedis } from '../helpers/redis.js';

/**
 * The fleet's buckets against a real redis-server, several limiters (each its own
 * connection: an instance's worth) in this process: exact under uneven load, timed by
 * Redis's own lateness (not this process's event loop), and limiting at each
 * instance's share while Redis is away (on_unavailable: local).
 */
const onRedis = fleetOnRedis();
const instance = (coordination: Record<string, unknown> = {}, url?: string, instances?: () => number) =>
  onRedis.instance({ coordination, ...(url ? { url } : {}), ...(instances ? { instances } : {}), start: true });

const key = (id: string, rl: KeyRecord['rate_limit']): KeyRecord => keyRecord(id, 'production', rl);
const unavailable = async (m: ReturnType<typeof createMetrics>, outcome: string) =>
  (await m.coordinationUnavailable.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;

/** `n` decisions on `k` through `limiter`, `inFlight` at a time; the count admitted. */
const hammer = (limiter: FleetLimiter, k: KeyRecord, n: number, inFlight: number) =>
  hammerFleet(limiter, k, n, inFlight, (d) => {
    // Headers stay honest: never more remaining than the bucket holds.
    const remaining = Number(d.headers[d.headers.indexOf('x-ratelimit-remaining') + 1]);
    if (remaining > 300) throw new Error(`x-ratelimit-remaining ${remaining} past the burst`);
  });

describe('a fleet bucket under uneven load', () => {
  it('admits exactly what one bucket would, 10 times: 600/200/100 requests through three instances, 16 in flight each', async () => {
    const fleet = [await instance(), await instance(), await instance()];
    const runs: number[] = [];
    for (let run = 0; run < 10; run++) {
      // Burst 300, refilled 300 a day: over a run of seconds one bucket admits exactly 300.
      const k = key(`uneven${run}`, { limit: 300, burst: 300, window: 'day' });
      const got = await Promise.all(
        [600, 200, 100].map((n, i) => hammer((fleet[i] as (typeof fleet)[number]).limiter, k, n, 16)),
      );
      runs.push(got.reduce((a, b) => a + b, 0));
    }
    expect(runs).toEqual(Array(10).fill(300));
    for (const f of fleet) expect(await unavailable(f.metrics, 'admitted')).toBe(0);
  });

  it('admits exactly what one bucket would, 10 times, when two instances take a lease and go idle while the third takes 600', async () => {
    const fleet = [await instance(), await instance(), await instance()];
    const runs: number[] = [];
    for (let run = 0; run < 10; run++) {
      const k = key(`idle${run}`, { limit: 300, burst: 300, window: 'day' });
      const [a, b, c] = fleet as [(typeof fleet)[number], (typeof fleet)[number], (typeof fleet)[number]];
      // Their leases hold more than they spend: the tokens left in them go back only when they idle.
      let admitted = (await hammer(b.limiter, k, 20, 4)) + (await hammer(c.limiter, k, 10, 4));
      admitted += await hammer(a.limiter, k, 600, 16);
      runs.push(admitted);
    }
    expect(runs).toEqual(Array(10).fill(300));
  });

  it('admits no more than one bucket with its refill, and no less than its burst, while it refills 100 a second', async () => {
    const fleet = [await instance(), await instance(), await instance()];
    for (let run = 0; run < 3; run++) {
      const k = key(`refill${run}`, { limit: 6000, burst: 300, window: 'minute' });
      const t0 = performance.now();
      const got = await Promise.all(
        [1200, 400, 200].map((n, i) => hammer((fleet[i] as (typeof fleet)[number]).limiter, k, n, 16)),
      );
      const seconds = (performance.now() - t0) / 1000;
      const admitted = got.reduce((a, b) => a + b, 0);
      expect(admitted).toBeLessThanOrEqual(300 + Math.ceil(100 * seconds) + 1);
      expect(admitted).toBeGreaterThanOrEqual(300);
    }
  });
});

describe("Redis's lateness, not the gateway's", () => {
  it('falls back to on_unavailable for no decision while Redis is healthy and the event loop is blocked 200 ms', async () => {
    const a = await instance({ timeout_ms: 50, on_unavailable: 'closed' });
    // Loaded scripts (a first call after a start is EVAL, once).
    await settle(a.limiter.check(key('warm', { limit: 10, burst: 10, window: 'day' }), '', null, Date.now()));
    for (let round = 0; round < 5; round++) {
      const ds = Array.from({ length: 40 }, (_, i) =>
        a.limiter.check(key(`lag${round}_${i}`, { limit: 10, burst: 10, window: 'day' }), '', null, Date.now()),
      );
      // Blocked right after the leases are asked for and written to the socket: Redis
      // answers within a millisecond, the process reads it 200 ms later.
      setImmediate(() =>
        setImmediate(() => {
          const until = performance.now() + 200;
          while (performance.now() < until);
        }),
      );
      const got = await Promise.all(ds.map(settle));
      expect(got.filter((d) => d.unavailable === true)).toHaveLength(0);
      expect(got.every((d) => d.allowed)).toBe(true);
    }
    expect(await unavailable(a.metrics, 'refused')).toBe(0);
    expect(a.co.answering).toBe(true);
  });
});

describe('while Redis is away (on_unavailable: local)', () => {
  it('limits each instance at its share of the bucket: the burst divided by the instances alive', async () => {
    const r = await startRedis();
    try {
      const beats: Heartbeat[] = [];
      const fleet = [];
      for (let i = 0; i < 3; i++) {
        const f = await instance({}, r.url, () => beats[i]?.instances ?? 1);
        fleet.push(f);
        beats.push(new Heartbeat(f.co));
      }
      for (const b of beats) await b.beat();
      // Each learns the count at its next beat.
      for (const b of beats) expect(await b.beat()).toBe(3);
      await r.stop();
      const k = key('away', { limit: 30, burst: 30, window: 'day' });
      const [a] = fleet as [(typeof fleet)[number]];
      const t0 = performance.now();
      const got = [];
      for (let i = 0; i < 40; i++) got.push(await settle(a.limiter.check(k, '', null, Date.now())));
      expect(performance.now() - t0).toBeLessThan(2000);
      expect(got.filter((d) => d.allowed)).toHaveLength(10);
      const refused = got.find((d) => !d.allowed) as LimitDecision;
      expect(refused.unavailable).toBeUndefined();
      expect(refused.retryAfter).toBeGreaterThan(60);
      expect(refused.headers).toContain('x-ratelimit-limit');
      expect(await unavailable(a.metrics, 'admitted')).toBe(10);
      expect(await unavailable(a.metrics, 'refused')).toBe(30);
      expect(a.co.answering).toBe(false);
      // The other two, together with the first, admit about what one bucket would.
      let others = 0;
      for (const f of fleet.slice(1))
        for (let i = 0; i < 40; i++) if ((await settle(f.limiter.check(k, '', null, Date.now()))).allowed) others++;
      expect(others).toBe(20);
    } finally {
      await r.stop();
    }
  });
});

describe('the shared bucket (TAKE and GIVE, Lua on Redis)', () => {
  it('never holds more than its burst in the bucket and the leases out, whatever instances take and give back', async () => {
    const m = createMetrics({ process: false });
    registerCoordination(m);
    const co = new Coordinator({ url: onRedis.redis().url, timeoutMs: 1000, log: createLogger('silent'), metrics: m });
    await co.start();
    try {
      let bucketNo = 0;
      const op = fc.oneof(
        fc.record({
          kind: fc.constant('take' as const),
          want: fc.integer({ min: 1, max: 400 }),
          need: fc.integer({ min: 1, max: 40 }),
        }),
        fc.record({ kind: fc.constant('give' as const), which: fc.nat(), spent: fc.nat() }),
      );
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 1, max: 300 }), fc.array(op, { maxLength: 40 }), async (cap, ops) => {
          const b = `prop:${bucketNo++}`;
          const keys = [b, `${b}:l`];
          // A refill of one token a day: nothing refills within the property's run.
          const rate = 1 / 86_400_000;
          const held: { member: string; grant: number }[] = [];
          let spent = 0;
          for (const [i, o] of ops.entries()) {
            if (o.kind === 'take') {
              const id = `i${i}`;
              const r = (await co.run(TAKE, keys, [id, 60_000, 1, 1, cap, rate, o.want, o.need], 'take')) as Reply[];
              const grant = Number(r[0]);
              if (grant > 0) held.push({ member: `${id}:1:${grant}`, grant });
            } else if (held.length > 0) {
              const [l] = held.splice(o.which % held.length, 1) as [{ member: string; grant: number }];
              const used = o.spent % (l.grant + 1);
              spent += used;
              await co.run(GIVE, keys, [l.member, l.grant - used, cap, rate], 'give');
            }
            const [tok, out] = ((await co.command(['HMGET', b, 'tok', 'out'], 'read')) as string[]).map(Number);
            const inLeases = held.reduce((a, l) => a + l.grant, 0);
            expect((tok as number) + (out as number)).toBeLessThanOrEqual(cap + 1e-6);
            expect(out).toBe(inLeases);
            // Everything handed out and not given back counts as spent: never more than one bucket.
            expect(spent + inLeases).toBeLessThanOrEqual(cap + 1e-6);
          }
        }),
        { numRuns: 60 },
      );
    } finally {
      await co.close();
    }
  });
});
