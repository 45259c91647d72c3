import { describe, expect, it } from 'vitest';
import type { FleetLimiter } from '../../src/fleet/buckets.js';
import { fleetOnRedis, settle } from '../helpers/fleet.js';

/**
 * The bucket table while Redis is away (on_unavailable: local): every client address
 * still refilling holds a share of its bucket, and many addresses must not grow memory
 * without bound; the sweep evicts, and an address evicted and back must admit no more
 * than one bucket would, fleet-wide.
 */
const onRedis = fleetOnRedis();
/** An instance of a fleet of two: each address's bucket 10 an hour (as auth: none, the default policy). */
const instance = async () =>
  (
    await onRedis.instance({
      values: { rate_limits: { default: { limit: 10, burst: 10, window: 'hour' } } },
      instances: () => 2,
    })
  ).limiter;

/** Whether `limiter` still holds address `ip`'s bucket (white box: the test must see an eviction). */
const holds = (limiter: FleetLimiter, ip: string) =>
  (limiter as unknown as { leases: Map<string, Map<string, unknown>> }).leases.get('a')?.has(ip) ?? false;

/** `n` decisions for address `ip`; the count admitted. */
async function admitted(limiter: FleetLimiter, ip: string, n: number): Promise<number> {
  let ok = 0;
  for (let i = 0; i < n; i++) {
    const d = limiter.check(null, ip, null, Date.now());
    if ((await settle(d)).allowed) ok++;
  }
  return ok;
}

describe('the bucket table while Redis is away (on_unavailable: local)', () => {
  it('keeps at most 50,000 idle buckets after a sweep, and an address evicted admits no more than one bucket', async () => {
    const fleet = [await instance(), await instance()];
    await onRedis.redis().stop();
    // The first address spends its whole bucket: its share (5) on each instance.
    const first = '10.0.0.1';
    for (const f of fleet) expect(await admitted(f, first, 10)).toBe(5);
    // 60,000 more addresses spend their shares after it: the first is full again soonest.
    for (const f of fleet) {
      for (let i = 0; i < 60_000; i++) {
        const ip = `10.${(i >> 16) + 1}.${(i >> 8) & 255}.${i & 255}`;
        for (let j = 0; j < 5; j++) await settle(f.check(null, ip, null, Date.now()));
      }
    }
    for (const f of fleet) {
      await f.sweep();
      expect(f.size).toBeLessThanOrEqual(50_000);
      expect(holds(f, first)).toBe(false);
    }
    // Evicted, it starts again where it was, not from a fresh share: one bucket, fleet-wide.
    let again = 0;
    for (const f of fleet) again += await admitted(f, first, 10);
    expect(again).toBe(0);
    // Addresses never seen still get their share (the sketch of evictions spares them).
    const [a] = fleet as [FleetLimiter, FleetLimiter];
    let fresh = 0;
    for (let i = 0; i < 100; i++) if ((await settle(a.check(null, `fresh${i}`, null, Date.now()))).allowed) fresh++;
    expect(fresh).toBeGreaterThanOrEqual(90);
  }, 120_000);
});
