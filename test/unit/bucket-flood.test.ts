import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { bucketHash, hashOut } from '../../src/ratelimit/bucket-hash.js';
import { RateLimiter } from '../../src/ratelimit/limiter.js';
import { allocateBuckets, tableStats, WINDOW } from '../../src/ratelimit/shared-buckets.js';
import { loopback, seededHome } from '../helpers/bucket-names.js';

const SLOTS = 1024;
const T0 = Date.UTC(2026, 0, 1);
const TIGHT = 'xtight\u0000';
const values = {
  ratelimit: { max_buckets: SLOTS, sketch_cells: 4096 },
  rate_limits: {
    default: { limit: 10, burst: 5, window: 'minute' },
    tight: { limit: 20, burst: 3, window: 'minute' },
  },
};
const cfg = loadConfig({ values });
const policy = (tag: string) =>
  (tag === 'a' ? cfg.rate_limits.default : cfg.rate_limits.tight) as { limit: number; burst: number };

/** Addresses whose address bucket or route bucket has its home in the window at `home`: chosen knowing the seed. */
function colliding(seed: [number, number], home: number, count: number): string[] {
  const out: string[] = [];
  for (let n = 0; out.length < count; n++) {
    const ip = loopback(n);
    const inWindow = (tag: string) => (seededHome(seed, tag, ip, SLOTS) - home + SLOTS) % SLOTS < WINDOW;
    if (inWindow('a') || inWindow(TIGHT)) out.push(ip);
  }
  return out;
}

describe('bucket decisions against an attacker who knows the seed (issue #34, item 3)', () => {
  it('every decision probes at most four windows, and no bucket admits more than its burst plus its refill', () => {
    fc.assert(
      fc.property(
        fc.tuple(fc.integer(), fc.integer()),
        fc.nat(SLOTS - 1),
        fc.array(fc.record({ who: fc.nat(47), route: fc.boolean(), dt: fc.nat(3_000) }), {
          minLength: 1,
          maxLength: 300,
        }),
        (seed, home, ops) => {
          const limiter = new RateLimiter(cfg, allocateBuckets(SLOTS, 4096, seed));
          const ips = colliding(seed, home, 48);
          const seen = new Map<string, { first: number; admitted: number }>();
          let now = T0;
          for (const op of ops) {
            now += op.dt;
            const ip = ips[op.who] as string;
            const before = tableStats.probes;
            const d = limiter.check(null, ip, op.route ? 'tight' : null, now);
            // Bounded work: one probe and one claim per bucket, two buckets at most.
            expect(tableStats.probes - before).toBeLessThanOrEqual(4 * WINDOW);
            for (const tag of op.route ? ['a', TIGHT] : ['a']) {
              const name = `${tag}${ip}`;
              const b = seen.get(name) ?? { first: now, admitted: 0 };
              seen.set(name, b);
              if (d.allowed) b.admitted++;
              // Eviction and collisions make a limit stricter, never looser.
              const p = policy(tag);
              const most = p.burst + ((now - b.first) * p.limit) / 60_000;
              expect(b.admitted).toBeLessThanOrEqual(most + 1e-9);
            }
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a whole window of draining buckets and a pair that collides in it: answered at once, the second never evicting the first', () => {
    const seed: [number, number] = [0x1234567, -0x7654321];
    const limiter = new RateLimiter(cfg, allocateBuckets(SLOTS, 4096, seed));
    const ips = colliding(seed, 100, 64);
    const now = T0;
    for (const ip of ips) limiter.check(null, ip, null, now);
    const before = tableStats.probes;
    for (const ip of ips) expect(limiter.check(null, ip, 'tight', now + 1).allowed).toBe(true);
    expect((tableStats.probes - before) / ips.length).toBeLessThanOrEqual(4 * WINDOW);
  });

  it('distinct bucket names hash apart (a tag and an id never run into each other), never to the empty mark', () => {
    const tags = fc.constantFrom('a', 'k', 's', 'r', 'q', 'xtight\u0000', 'xreports\u0000');
    fc.assert(
      fc.property(
        fc.tuple(fc.integer(), fc.integer()),
        tags,
        fc.string(),
        tags,
        fc.string(),
        (seed, t1, i1, t2, i2) => {
          fc.pre(t1 !== t2 || i1 !== i2);
          bucketHash(seed[0], seed[1], t1, i1);
          const a = [hashOut.h1, hashOut.h2];
          bucketHash(seed[0], seed[1], t2, i2);
          expect(hashOut.h2).not.toBe(0);
          expect([hashOut.h1, hashOut.h2]).not.toEqual(a);
        },
      ),
      { numRuns: 5_000 },
    );
  });
});
