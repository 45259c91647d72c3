import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { loadConfig } from '../../src/config/index.js';
import { type QuotaWarning, RateLimiter } from '../../src/ratelimit/limiter.js';
import { decodeBuckets, encodeBuckets } from '../../src/ratelimit/persist.js';
import {
  allocateBuckets,
  claimsOf,
  SharedBuckets,
  type SharedBucketsLayout,
} from '../../src/ratelimit/shared-buckets.js';
import type { LimitDecision } from '../../src/ratelimit/types.js';
import { keyRecord } from '../helpers/keys.js';

const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
const key = keyRecord;
const limiter = (over: Record<string, unknown> = {}) => new RateLimiter(loadConfig({ values: over }));
const header = (d: LimitDecision, name: string) => d.headers[d.headers.indexOf(name) + 1];
function drain(
  l: RateLimiter,
  k: KeyRecord | null,
  n: number,
  now: number,
  policy: string | null = null,
  ip = '1.1.1.1',
): number {
  let ok = 0;
  for (let i = 0; i < n; i++) if (l.check(k, ip, policy, now).allowed) ok++;
  return ok;
}

describe('token buckets', () => {
  it('default policy: exactly 9,000 at once, then 100 a second', () => {
    const l = limiter();
    const k = key('a');
    expect(drain(l, k, 9000, T0)).toBe(9000);
    const refused = l.check(k, '', null, T0);
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfter).toBe(1);
    expect(drain(l, k, 1000, T0 + 1000)).toBe(100);
    expect(drain(l, k, 1000, T0 + 1010)).toBe(1);
    expect(drain(l, k, 10_000, T0 + 61_010)).toBe(6000);
  });

  it('retry-after is the true wait for one token, rounded up to whole seconds', () => {
    const l = limiter();
    const k = key('w');
    expect(drain(l, k, 120, T0, 'webhook_registration')).toBe(120);
    const d = l.check(k, '', 'webhook_registration', T0);
    expect(d.allowed).toBe(false);
    expect(d.retryAfter).toBe(30); // 120 an hour: one every 30 s
    expect(header(d, 'retry-after')).toBe('30');
    expect(l.check(k, '', 'webhook_registration', T0 + 29_999).allowed).toBe(false);
    expect(l.check(k, '', 'webhook_registration', T0 + 30_000).allowed).toBe(true);
  });

  it("a key's own rate_limit replaces the default", () => {
    const l = limiter();
    const k = key('own', 'production', { limit: 60, burst: 10, window: 'minute' });
    expect(drain(l, k, 50, T0)).toBe(10);
    expect(l.check(k, '', null, T0).retryAfter).toBe(1);
    expect(drain(l, k, 50, T0 + 1000)).toBe(1);
    expect(drain(l, k, 50, T0 + 5000)).toBe(4);
  });

  it('every test-class key shares the one sandbox bucket', () => {
    const l = limiter();
    const a = key('sa', 'sandbox');
    const b = key('sb', 'sandbox', { limit: 100_000, burst: 100_000, window: 'minute' });
    expect(drain(l, a, 700, T0)).toBe(700);
    expect(drain(l, b, 700, T0)).toBe(500);
    expect(l.check(a, '', null, T0).policy).toBe('sandbox');
    expect(drain(l, key('live'), 10, T0)).toBe(10);
  });

  it('a route with its own policy draws from both buckets, all or nothing', () => {
    const l = limiter();
    const k = key('r');
    expect(drain(l, k, 700, T0, 'reports')).toBe(600);
    const refused = l.check(k, '', 'reports', T0);
    expect(refused.policy).toBe('reports');
    // The 100 refused report calls took nothing from the key's own bucket.
    const plain = l.check(k, '', null, T0);
    expect(header(plain, 'x-ratelimit-remaining')).toBe(String(9000 - 600 - 1));
    // And when the key's bucket refuses, the reports bucket is not charged.
    const k2 = key('r2', 'production', { limit: 5, burst: 5, window: 'minute' });
    expect(drain(l, k2, 5, T0)).toBe(5);
    expect(l.check(k2, '', 'reports', T0).allowed).toBe(false);
    const later = l.check(k2, '', 'reports', T0 + 12_000);
    expect(later.allowed).toBe(true);
    expect(later.headers[later.headers.indexOf('ratelimit') + 1]).toContain('"reports";r=599;');
  });

  it('120 webhook registrations an hour', () => {
    const l = limiter();
    const k = key('wh');
    expect(drain(l, k, 200, T0, 'webhook_registration')).toBe(120);
    expect(drain(l, k, 200, T0 + 3_600_000, 'webhook_registration')).toBe(120);
  });

  it('sets the headers on allowed and refused answers', () => {
    const l = limiter();
    const k = key('h', 'production', { limit: 60, burst: 10, window: 'minute' });
    const ok = l.check(k, '', null, T0);
    expect(
      Object.fromEntries(
        Array.from({ length: ok.headers.length / 2 }, (_, i) => [ok.headers[2 * i], ok.headers[2 * i + 1]]),
      ),
    ).toEqual({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '9',
      'x-ratelimit-reset': '1',
      'ratelimit-policy': '"key";q=60;w=60',
      ratelimit: '"key";r=9;t=1',
    });
    drain(l, k, 9, T0);
    const no = l.check(k, '', null, T0);
    expect(no.allowed).toBe(false);
    expect(header(no, 'x-ratelimit-remaining')).toBe('0');
    expect(header(no, 'x-ratelimit-reset')).toBe('10');
    expect(header(no, 'retry-after')).toBe('1');
  });

  it('limits unkeyed requests per client address', () => {
    const l = limiter({ rate_limits: { default: { limit: 60, burst: 3, window: 'minute' } } });
    expect(drain(l, null, 10, T0, null, '10.0.0.1')).toBe(3);
    expect(drain(l, null, 10, T0, null, '10.0.0.2')).toBe(3);
  });
});

describe('quota warnings', () => {
  it('fire once per key, threshold and window at 80% and 95% of limit', () => {
    const warnings: QuotaWarning[] = [];
    const l = new RateLimiter(loadConfig({ values: {} }), undefined, (w) => warnings.push(w));
    const k = key('q', 'production', { limit: 100, burst: 200, window: 'minute' });
    drain(l, k, 79, T0);
    expect(warnings).toEqual([]);
    drain(l, k, 1, T0);
    expect(warnings.map((w) => [w.threshold, w.used])).toEqual([[0.8, 80]]);
    drain(l, k, 15, T0 + 1);
    expect(warnings.map((w) => [w.threshold, w.used])).toEqual([
      [0.8, 80],
      [0.95, 95],
    ]);
    drain(l, k, 5, T0 + 2);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatchObject({ limit: 100, window: 'minute' });
    drain(l, k, 80, T0 + 60_000);
    expect(warnings).toHaveLength(3);
    drain(l, key('other', 'production', { limit: 100, burst: 200, window: 'minute' }), 80, T0 + 60_000);
    expect(warnings).toHaveLength(4);
  });
});

describe('bounded memory', () => {
  it('one million distinct client addresses stay within max_buckets', () => {
    const l = limiter({ ratelimit: { max_buckets: 50_000, sketch_cells: 65_536 } });
    for (let i = 0; i < 1_000_000; i++) l.check(null, `a${i}`, null, T0 + i);
    expect(l.size).toBeLessThanOrEqual(50_000);
  });

  it('sweeping drops only full buckets, and eviction never resets a drained bucket', () => {
    const l = limiter({ ratelimit: { max_buckets: 100, sketch_cells: 4096 } });
    const drained = key('drained', 'production', { limit: 60, burst: 10, window: 'minute' });
    expect(drain(l, drained, 10, T0)).toBe(10);
    l.sweep(T0 + 1000);
    expect(l.check(drained, '', null, T0 + 1000).allowed).toBe(true);
    expect(l.check(drained, '', null, T0 + 1000).allowed).toBe(false);
    // Push it out with 1,000 other keys.
    for (let i = 0; i < 1000; i++) l.check(key(`k${i}`), '', null, T0 + 1000);
    expect(l.size).toBeLessThanOrEqual(100);
    expect(l.check(drained, '', null, T0 + 1000).allowed).toBe(false);
    expect(l.check(drained, '', null, T0 + 2000).allowed).toBe(true);
    // A full bucket is swept away: it is the same as none.
    l.sweep(T0 + 3_600_000);
    expect(l.size).toBe(0);
  });
  it('an idle table is not scanned again: only a bucket entering a slot makes the next sweep look', () => {
    const layout = allocateBuckets(64, 1024);
    const l = new RateLimiter(loadConfig({ values: {} }), layout);
    const table = new SharedBuckets(layout);
    const k = key('idle', 'production', { limit: 60, burst: 10, window: 'minute' });
    expect(claimsOf(layout)).toBe(0);
    drain(l, k, 3, T0);
    const claimed = claimsOf(layout);
    expect(claimed).toBeGreaterThan(0);
    // Drawing again from buckets already in their slots claims none.
    drain(l, k, 3, T0);
    expect(claimsOf(layout)).toBe(claimed);
    expect(table.sweep(T0 + 3_600_000)).toBe(claimed);
    // A slot filled behind the claim count's back (never done by the gateway; marked in
    // use too, as a claim marks it) shows the next sweep of the emptied table does not scan it.
    const raw = new Int32Array(layout.buffer);
    raw[16 + 1] = 7;
    raw[16 + 2] = 9;
    raw[((1 + 64) * 64 + 1024 * 8) / 4] = 1;
    // Slot 0's tokens, last refill, burst and rate: a bucket full since T0.
    new Float64Array(layout.buffer).set([1, T0, 1, 1], 8 + 3);
    expect(table.sweep(T0 + 3_600_000)).toBe(0);
    // A new bucket is a claim: the sweep after it looks at every slot again.
    drain(l, key('new', 'production', { limit: 60, burst: 10, window: 'minute' }), 1, T0 + 3_600_000);
    expect(table.sweep(T0 + 7_200_000)).toBeGreaterThanOrEqual(2);
  });

  it('the sweep and the snapshot go only through the slots marked in use, and every bucket put in a slot is marked', () => {
    // 100 slots: four words of bits, the last one partly past the table.
    const layout = allocateBuckets(100, 1024, [7, 11]);
    const l = new RateLimiter(loadConfig({ values: {} }), layout);
    const table = new SharedBuckets(layout);
    const raw = new Int32Array(layout.buffer);
    const held = () => {
      const s: number[] = [];
      for (let i = 0; i < 100; i++) if (raw[(1 + i) * 16 + 2] !== 0) s.push(i);
      return s;
    };
    const marked = () => {
      const s: number[] = [];
      for (let i = table.nextUsed(0); i >= 0; i = table.nextUsed(i + 1)) s.push(i);
      return s;
    };
    for (let i = 0; i < 60; i++) drain(l, null, 1, T0, null, `10.0.0.${i}`);
    const n = held().length;
    expect(n).toBeGreaterThan(50);
    expect(marked()).toEqual(held());
    // The snapshot holds every bucket, and a table read back from it marks them again.
    const bytes = encodeBuckets(layout, T0);
    expect(bytes.readUInt32LE(16)).toBe(n);
    const back = decodeBuckets(bytes, 100, 1024, T0);
    expect(back).not.toBeNull();
    expect(new SharedBuckets(back as SharedBucketsLayout).size(T0)).toBe(n);
    // A slot filled behind the bits' back (never done by the gateway) is neither saved nor swept.
    const free = [...Array(100).keys()].find((i) => raw[(1 + i) * 16 + 2] === 0) as number;
    raw[(1 + free) * 16 + 1] = 7;
    raw[(1 + free) * 16 + 2] = 9;
    // Its tokens, last refill, burst and rate: a bucket still draining at T0.
    new Float64Array(layout.buffer).set([0, T0, 10, 1], (1 + free) * 8 + 3);
    expect(encodeBuckets(layout, T0).readUInt32LE(16)).toBe(n);
    // The sweep empties the marked slots and their bits.
    expect(table.sweep(T0 + 3_600_000)).toBe(n);
    expect(marked()).toEqual([]);
    expect(held()).toEqual([free]);
  });
});
