import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { loadConfig } from '../../src/config/index.js';
import { RateLimiter } from '../../src/ratelimit/limiter.js';
import { keyRecord } from '../helpers/keys.js';

const T0 = Date.UTC(2026, 0, 1);
const HAMMER = fileURLToPath(new URL('../fixtures/bucket-hammer.mjs', import.meta.url));
const THREADS = 4;

// 100 at once, then one a day: nothing refills during the run.
const key = (id: string, env = 'production') => keyRecord(id, env, { limit: 1, burst: 100, window: 'day' });

interface Result {
  remaining: number[];
  refused: number;
}

/** `THREADS` threads (the built limiter) ask at once, `n` each, against one shared table. */
async function hammer(
  values: Record<string, unknown>,
  args: { key: KeyRecord | null; ip: string; policy: string | null; n: number },
) {
  const limiter = new RateLimiter(loadConfig({ values }));
  const start = new SharedArrayBuffer(8);
  const flag = new Int32Array(start);
  const workers = Array.from(
    { length: THREADS },
    () => new Worker(HAMMER, { workerData: { layout: limiter.layout, start, values, now: T0, ...args } }),
  );
  const results = workers.map(
    (w) =>
      new Promise<Result>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      }),
  );
  while (Atomics.load(flag, 1) < THREADS) await new Promise((r) => setTimeout(r, 5));
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
    const limiter = new RateLimiter(loadConfig({ values }));
    const other = new RateLimiter(loadConfig({ values }), limiter.layout);
    const warnings: number[] = [];
    limiter.onWarning = (w) => warnings.push(w.threshold);
    other.onWarning = (w) => warnings.push(w.threshold);
    const k = key('key_quota');
    for (let i = 0; i < 100; i++) (i % 2 ? limiter : other).check(k, '', null, T0);
    expect(warnings.sort()).toEqual([0.8, 0.95]);
  });
});
