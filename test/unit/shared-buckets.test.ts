import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { loadConfig } from '../../src/config/index.js';
import { type QuotaWarning, RateLimiter } from '../../src/ratelimit/limiter.js';
import { FROM_SOURCES } from '../helpers/child.js';
import { keyRecord } from '../helpers/keys.js';

const T0 = Date.UTC(2026, 0, 1);
const HAMMER = fileURLToPath(new URL('../fixtures/bucket-hammer.mjs', import.meta.url));
const THREADS = 4;

// 100 at once, then one a day: nothing refills during the run.
const key = (id: string, env = 'production') => keyRecord(id, env, { limit: 1, burst: 100, window: 'day' });

interface Result {
  remaining: number[];
  refused: number;
  /** Requests admitted per client address. */
  admitted: Record<string, number>;
  /** Buckets this thread evicted into the sketch. */
  evictions: number;
}

interface Plan {
  key: KeyRecord | null;
  ip?: string;
  /** Addresses asked from in turn, `repeat` times each. */
  ips?: string[];
  repeat?: number;
  policy: string | null;
  n: number;
}

/** `THREADS` threads (the limiter, from its sources) ask at once, `n` each, against one shared table. */
const hammer = (values: Record<string, unknown>, args: Plan) => hammerEach(values, Array(THREADS).fill(args));

/** One thread per plan, all starting at once against one shared table. */
async function hammerEach(values: Record<string, unknown>, plans: Plan[]) {
  const limiter = new RateLimiter(loadConfig({ values }));
  const start = new SharedArrayBuffer(8);
  const flag = new Int32Array(start);
  const workers = plans.map(
    (args) =>
      new Worker(HAMMER, {
        execArgv: FROM_SOURCES,
        workerData: { layout: limiter.layout, start, values, now: T0, ...args },
      }),
  );
  const results = workers.map(
    (w) =>
      new Promise<Result>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      }),
  );
  while (Atomics.load(flag, 1) < plans.length) await new Promise((r) => setTimeout(r, 5));
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
  const all = await Promise.all(results);
  await Promise.all(workers.map((w) => w.terminate()));
  return { all, limiter };
}

const admitted = (all: Result[]) => all.flatMap((r) => r.remaining).sort((a, b) => b - a);
const countdown = (n: number) => Array.from({ length: n }, (_, i) => n - 1 - i);

describe('buckets shared by threads', () => {
  it('one key of burst 100 hammered by 4 threads: exactly 100 admitted, each remaining count once', async () => {
    const { all } = await hammer({}, { key: key('key_hot'), ip: '10.0.0.1', policy: null, n: 2_000 });
    expect(admitted(all)).toEqual(countdown(100));
    expect(all.reduce((n, r) => n + r.refused, 0)).toBe(THREADS * 2_000 - 100);
    // Every thread took part in the race.
    expect(all.every((r) => r.remaining.length + r.refused === 2_000)).toBe(true);
  });

  it('the shared sandbox bucket: exactly its burst across threads', async () => {
    const values = { rate_limits: { sandbox: { limit: 1, burst: 300, window: 'day' } } };
    const { all } = await hammer(values, { key: key('key_test', 'sandbox'), ip: '10.0.0.1', policy: null, n: 1_000 });
    expect(admitted(all)).toEqual(countdown(300));
  });

  it('a per-address route policy drawn with the default bucket: all or nothing, exact', async () => {
    const values = { rate_limits: { tight: { limit: 1, burst: 50, window: 'day' } } };
    const { all, limiter } = await hammer(values, { key: null, ip: '10.0.0.9', policy: 'tight', n: 1_000 });
    expect(admitted(all)).toEqual(countdown(50));
    // All or nothing: the address's default bucket lost exactly the 50 admitted (9,000 burst).
    const d = limiter.check(null, '10.0.0.9', null, T0);
    expect(d.headers[d.headers.indexOf('x-ratelimit-remaining') + 1]).toBe(String(9_000 - 50 - 1));
  });

  it('quota warnings fire once per threshold across threads', async () => {
    // A shared table: warnings are counted in it, so the 80% threshold is crossed by exactly one thread.
    const values = {};
    const warnings: number[] = [];
    const heard = (w: QuotaWarning) => void warnings.push(w.threshold);
    const limiter = new RateLimiter(loadConfig({ values }), undefined, heard);
    const other = new RateLimiter(loadConfig({ values }), limiter.layout, heard);
    const k = key('key_quota');
    for (let i = 0; i < 100; i++) (i % 2 ? limiter : other).check(k, '', null, T0);
    expect(warnings.sort()).toEqual([0.8, 0.95]);
  });

  it('claims racing draws never give back spent tokens: a bucket evicted while drawn from keeps its debt', async () => {
    // 16 slots: every bucket shares the one window, so each new address evicts the one that
    // would be full soonest, an address other threads are drawing from right then.
    const values = {
      ratelimit: { max_buckets: 16, sketch_cells: 1_048_576 },
      rate_limits: { default: { limit: 1, burst: 100, window: 'day' } },
    };
    const addresses = (t: number) => Array.from({ length: 200 }, (_, i) => `10.${t}.${i >> 8}.${i & 255}`);
    // Two threads on each list, 300 asks per address: a token given back shows as a 101st admission.
    const plan = (t: number): Plan => ({ key: null, ips: addresses(t), repeat: 300, policy: null, n: 30_000 });
    let evictions = 0;
    for (let round = 0; round < 3; round++) {
      const { all } = await hammerEach(values, [plan(1), plan(1), plan(2), plan(2)]);
      // Nothing refills during the run: no address may be admitted past its burst.
      const per = new Map<string, number>();
      for (const r of all) for (const [ip, n] of Object.entries(r.admitted)) per.set(ip, (per.get(ip) ?? 0) + n);
      expect([...per].filter(([, n]) => n > 100)).toEqual([]);
      evictions += all.reduce((n, r) => n + r.evictions, 0);
    }
    // Buckets were evicted while drawn from, and came back with their debt.
    expect(evictions).toBeGreaterThan(100);
  }, 120_000);
});
