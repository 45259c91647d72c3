import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type ShareBucket, shareDecision, shareOf } from '../../src/fleet/share.js';
import type { Policy } from '../../src/ratelimit/policy.js';

const policy = (limit: number, burst: number, windowMs: number): Policy => ({
  name: 'p',
  limit,
  burst,
  windowMs,
  rate: limit / windowMs,
  shared: false,
  header: '"p";q=1;w=1',
});

/** on_unavailable: local: what n instances admit alone, each at its share, against what one bucket would. */
describe('a bucket shared out while Redis is away', () => {
  it('lets n instances together admit no more than the bucket held plus its refill, whatever n, left and time', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 1, max: 12 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.array(fc.tuple(fc.nat(11), fc.integer({ min: 0, max: 5000 })), { maxLength: 300 }),
        (limit, burst, n, fill, steps) => {
          const p = policy(limit, burst, 60_000);
          const left = burst * fill;
          const shares: (ShareBucket | null)[] = Array(n).fill(null);
          let t = 0;
          let admitted = 0;
          for (const [who, dt] of steps) {
            t += dt;
            const i = who % n;
            const s = shareOf(shares[i] ?? null, p, n, left, t);
            shares[i] = s;
            if (shareDecision(s, null).allowed) admitted++;
            expect(s.tokens).toBeLessThanOrEqual(s.policy.burst + 1e-9);
          }
          // Each share starts at left/n (at least one token of burst each) and refills at rate/n.
          const bound = Math.max(left, n * Math.min(1, left)) + p.rate * t + n;
          expect(admitted).toBeLessThanOrEqual(bound);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('cuts the share again when the count of instances changes, never handing out more than was left', () => {
    const p = policy(300, 300, 86_400_000);
    const s = shareOf(null, p, 3, 300, 0);
    expect(s.tokens).toBe(100);
    for (let i = 0; i < 60; i++) shareDecision(s, null);
    const again = shareOf(s, p, 2, 300, 1);
    expect(again.policy.burst).toBe(150);
    expect(again.tokens).toBeCloseTo(40, 3);
  });
});
