import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { loadConfig } from '../../src/config/index.js';
import { CLOCK_STEP_MS, type Refillable, refill } from '../../src/ratelimit/buckets.js';
import { type QuotaWarning, RateLimiter } from '../../src/ratelimit/limiter.js';
import { decodeBuckets, encodeBuckets } from '../../src/ratelimit/persist.js';
import {
  allocateBuckets,
  type BucketRef,
  SharedBuckets,
  type SharedBucketsLayout,
  tableStats,
} from '../../src/ratelimit/shared-buckets.js';
import { keyRecord } from '../helpers/keys.js';

// A minute's start. The host's clock was an hour fast: NTP steps it back to T0 - HOUR.
const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const HOUR = 3_600_000;
const BACK = T0 - HOUR;
// A fixed hash seed: which buckets share a sketch cell is the same every run.
const SEED: [number, number] = [0x1234567, 0x7654321];
const CELLS = 4096;

describe('a token bucket (buckets.ts) when the clock steps back', () => {
  const bucket = (tokens: number, t: number): Refillable => ({ tokens, t, p: { rate: 0.001, burst: 2 } });

  it('an hour back: its time is taken back to now, nothing added; it refills from now, up to its burst', () => {
    const b = bucket(0, T0);
    refill(b, BACK);
    expect(b).toMatchObject({ tokens: 0, t: BACK });
    refill(b, BACK + 1_000);
    expect(b.tokens).toBeCloseTo(1, 9);
    refill(b, BACK + 60_000);
    expect(b.tokens).toBe(2);
  });

  it('a step of up to CLOCK_STEP_MS is waited out: a reading a moment old earns nothing twice', () => {
    const b = bucket(0, T0);
    refill(b, T0 - CLOCK_STEP_MS);
    expect(b).toMatchObject({ tokens: 0, t: T0 });
    refill(b, T0 + 500);
    expect(b.tokens).toBeCloseTo(0.5, 9);
  });

  it('never NaN, never above its burst', () => {
    const b = bucket(1.5, T0);
    refill(b, Number.NaN);
    expect(b).toMatchObject({ tokens: 1.5, t: T0 });
    refill(b, BACK);
    expect(b).toMatchObject({ tokens: 1.5, t: BACK });
    refill(b, T0 + HOUR);
    expect(b.tokens).toBe(2);
  });
});

/** A bucket of 2 tokens refilled at 1 a second. */
const small = (id: string): BucketRef => ({ tag: 'k', id, burst: 2, rate: 0.001 });
/** A bucket of 1000 tokens refilled at 1 a second: full again 1000 s after it is drained. */
const big = (id: string): BucketRef => ({ tag: 'a', id, burst: 1_000, rate: 0.001 });

/** Claims `r` (or finds it) at `now`, takes `take` tokens if it holds them, returns what it held. */
function draw(t: SharedBuckets, r: BucketRef, now: number, take = 0): number {
  const s = t.acquire(r, now);
  const tokens = t.refill(s, now, r.burst, r.rate);
  if (take > 0 && tokens >= take) t.setTokens(s, tokens - take);
  t.unlock(s);
  return tokens;
}

/** The latest debt in the sketch, on the wall clock at `now`. */
function latestDebt(t: SharedBuckets, now: number): number {
  const shift = t.debtShiftAt(now);
  let latest = Number.NEGATIVE_INFINITY;
  for (const v of t.sketch) if (v - shift > latest) latest = v - shift;
  return latest;
}

describe('the shared table when the clock steps back', () => {
  it('a drained bucket refills from now, not from when the clock gets back to it', () => {
    const t = new SharedBuckets(allocateBuckets(64, 64));
    const k = small('drained');
    expect(draw(t, k, T0, 2)).toBe(2);
    expect(draw(t, k, BACK)).toBe(0);
    expect(draw(t, k, BACK + 1_000)).toBeCloseTo(1, 9);
    expect(draw(t, k, BACK + 5_000)).toBe(2);
  });

  it('a step of up to CLOCK_STEP_MS (another thread read the clock a moment earlier) earns no refill twice', () => {
    const t = new SharedBuckets(allocateBuckets(64, 64));
    const k = small('stale');
    draw(t, k, T0, 2);
    expect(draw(t, k, T0 + 1_000)).toBeCloseTo(1, 9);
    expect(draw(t, k, T0 + 200)).toBeCloseTo(1, 9);
    // Refilled from T0 + 1 s, not again from T0 + 200 ms.
    expect(draw(t, k, T0 + 1_500)).toBeCloseTo(1.5, 9);
  });

  it('a bucket untouched since the step: the sweep takes its time back, it is swept once full from then', () => {
    const t = new SharedBuckets(allocateBuckets(64, 64));
    // Half full at T0: full again at T0 + 1 s.
    draw(t, small('half'), T0, 1);
    expect(t.sweep(BACK)).toBe(0);
    expect(t.size(BACK + 999)).toBe(1);
    expect(t.size(BACK + 1_000)).toBe(0);
    expect(t.sweep(BACK + 1_000)).toBe(1);
  });

  it('the debt sketch: a debt folded before the step is as long as it was; one folded after is at most a bucket from empty', () => {
    // 16 slots: one probe window, so every claim past 16 buckets evicts one.
    const t = new SharedBuckets(allocateBuckets(16, CELLS, SEED));
    const k = small('evicted');
    draw(t, k, T0, 2);
    const before = tableStats.evictions;
    // 16 bigger debts: the key's bucket (full again at T0 + 2 s) is evicted first.
    for (let i = 0; i < 16; i++) draw(t, big(`b${i}`), T0, 1_000);
    expect(tableStats.evictions - before).toBe(1);
    expect(latestDebt(t, T0)).toBe(T0 + 2_000);

    // An hour back: claimed again, the key owes what it owed (2 s from its draw), not an
    // hour more; it evicts a big bucket untouched since T0, whose debt is folded from now
    // (1000 s), not from an hour ahead.
    expect(draw(t, k, BACK)).toBe(0);
    expect(tableStats.evictions - before).toBe(2);
    expect(latestDebt(t, BACK)).toBe(BACK + 1_000_000);
    expect(draw(t, k, BACK + 1_000)).toBeCloseTo(1, 9);
    // Full again at BACK + 2 s: swept, and claimed again it starts full. Were the cell
    // still "full at T0 + 2 s", an hour ahead, every claim for an hour would start empty.
    expect(t.sweep(BACK + 2_000)).toBe(1);
    expect(draw(t, k, BACK + 3_000)).toBe(2);
  });

  it('the sketch keeps its own time across saves: written on the wall clock, read back at once the same', () => {
    const layout = allocateBuckets(16, CELLS, SEED);
    const t = new SharedBuckets(layout);
    draw(t, small('saved'), T0, 2);
    for (let i = 0; i < 16; i++) draw(t, big(`b${i}`), T0, 1_000);
    draw(t, small('claim'), BACK);
    expect(latestDebt(t, BACK)).toBe(BACK + 1_000_000);
    const back = decodeBuckets(encodeBuckets(layout, BACK), 16, CELLS, BACK) as SharedBucketsLayout;
    const again = new SharedBuckets(back);
    expect(latestDebt(again, BACK)).toBe(latestDebt(t, BACK));
    expect(latestDebt(again, BACK)).toBeLessThanOrEqual(BACK + 1_000_000);
  });
});

describe('the limiter when the clock steps back', () => {
  const SLOTS = 16;
  // Addresses: a token an hour (full again an hour after a request): a key's bucket is
  // evicted before them. Bursts so large that only the key's own policy refuses.
  const values = {
    ratelimit: { max_buckets: SLOTS, sketch_cells: CELLS },
    rate_limits: { default: { limit: 1, burst: 1_000_000, window: 'hour' } },
  };
  // One token a second, two at most: the review's key.
  const paced = keyRecord('step_back', 'production', { limit: 60, burst: 2, window: 'minute' });
  // Ten a minute, never refused.
  const counted = keyRecord('step_back_quota', 'production', { limit: 10, burst: 1_000_000, window: 'minute' });

  function setup(layout?: SharedBucketsLayout) {
    const warnings: QuotaWarning[] = [];
    const l = new RateLimiter(loadConfig({ values }), layout ?? allocateBuckets(SLOTS, CELLS, SEED), (w) =>
      warnings.push(w),
    );
    return { l, heard: () => warnings.map((w) => [w.threshold, w.used, w.windowStart]) };
  }
  const ask = (l: RateLimiter, key: KeyRecord, now: number) => l.check(key, '1.1.1.1', null, now);
  let round = 0;
  /** New addresses' buckets fill the table: every key's bucket is evicted. */
  function evictKeys(l: RateLimiter, now: number): void {
    round++;
    for (let i = 0; i < 2 * SLOTS; i++) expect(l.check(null, `10.${round}.0.${i}`, null, now).allowed).toBe(true);
  }

  it('drained, then an hour back: Retry-After 1 is kept, the key is admitted again a second later', () => {
    const { l } = setup();
    expect(ask(l, paced, T0).allowed).toBe(true);
    expect(ask(l, paced, T0).allowed).toBe(true);
    expect(ask(l, paced, T0).retryAfter).toBe(1);
    const refused = ask(l, paced, BACK);
    expect(refused).toMatchObject({ allowed: false, retryAfter: 1 });
    expect(ask(l, paced, BACK + 1_000).allowed).toBe(true);
  });

  it('drained, evicted, then an hour back: claimed again from the sketch, the key waits its refill, not the hour', () => {
    const { l } = setup();
    ask(l, paced, T0);
    ask(l, paced, T0);
    evictKeys(l, T0 + 500);
    expect(ask(l, paced, BACK)).toMatchObject({ allowed: false, retryAfter: 1 });
    expect(ask(l, paced, BACK + 1_000).allowed).toBe(true);
    // Evicted again once full: claimed again, it starts full (its debt is paid).
    evictKeys(l, BACK + 3_000);
    expect(ask(l, paced, BACK + 4_000).allowed).toBe(true);
    expect(ask(l, paced, BACK + 4_000).allowed).toBe(true);
  });

  it('a restart with the clock an hour back: the saved bucket and debts wait their refill from now', () => {
    const first = setup();
    // `paced` drained (full again at T0 + 2 s) and evicted into the sketch; `other` drained in its slot.
    ask(first.l, paced, T0);
    ask(first.l, paced, T0);
    evictKeys(first.l, T0 + 200);
    const other = keyRecord('step_back_other', 'production', paced.rate_limit);
    ask(first.l, other, T0 + 300);
    ask(first.l, other, T0 + 300);
    const back = decodeBuckets(encodeBuckets(first.l.layout, T0 + 500), SLOTS, CELLS, BACK);
    expect(back).not.toBeNull();
    const { l } = setup(back as SharedBucketsLayout);
    expect(ask(l, other, BACK)).toMatchObject({ allowed: false, retryAfter: 1 });
    expect(ask(l, other, BACK + 1_000).allowed).toBe(true);
    // `paced`'s debt ends as long after the restart's clock as after the saving one's.
    expect(ask(l, paced, BACK + 2_000).allowed).toBe(true);
    expect(ask(l, paced, BACK + 2_000).allowed).toBe(true);
  });

  it("a quota count whose window starts after now goes on in now's window: nothing lost, no warning twice", () => {
    const { l, heard } = setup();
    for (let i = 0; i < 8; i++) expect(ask(l, counted, T0 + 1_000).allowed).toBe(true);
    expect(heard()).toEqual([[0.8, 8, T0]]);
    // Back into the minute before T0: counted on from 8, 80% not warned again.
    ask(l, counted, T0 - 30_000);
    expect(heard()).toHaveLength(1);
    ask(l, counted, T0 - 30_000);
    expect(heard()).toEqual([
      [0.8, 8, T0],
      [0.95, 10, T0 - 60_000],
    ]);
    // The next minute counts from nothing.
    for (let i = 0; i < 8; i++) ask(l, counted, T0 + 1_000);
    expect(heard()).toHaveLength(3);
  });

  it('the same for a count kept in the quota sketch (the bucket evicted before the step)', () => {
    const { l, heard } = setup();
    for (let i = 0; i < 8; i++) ask(l, counted, T0 + 1_000);
    evictKeys(l, T0 + 2_000);
    ask(l, counted, T0 - 30_000);
    expect(heard()).toEqual([[0.8, 8, T0]]);
    // Evicted again in the minute before T0, and claimed again: the level still holds.
    evictKeys(l, T0 - 29_000);
    ask(l, counted, T0 - 28_000);
    expect(heard()).toEqual([
      [0.8, 8, T0],
      [0.95, 10, T0 - 60_000],
    ]);
  });
});
