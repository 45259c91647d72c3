// Regression tests from a review of the fleet on Redis (2026-11-28).
import { describe, expect, it } from 'vitest';
import { fleetOnRedis, hammer } from '../helpers/fleet.js';
import { keyRecord } from '../helpers/keys.js';

/*
 * Review (fleet on Redis): docs/security.md, Redis read and write: "miscount shared buckets,
 * bounded: ... whatever Redis holds or answers (HSET … tok 1e12, DEL in a loop, garbage) an
 * instance admits a key at most its burst plus its refill (and one second of refill for clock
 * slack)". A bucket key rewritten to another type (SET <bucket> x) makes every TAKE fail with
 * WRONGTYPE while Redis itself answers (coordination up); FleetLimiter.remote() takes any error
 * as an outage and follows on_unavailable: with `open`, that key is admitted without any limit,
 * its own in-memory ceiling skipped.
 */
const onRedis = fleetOnRedis();
// Redis given 10 s to answer: a loaded test host's latency is then no outage, under which
// `open` rightly admits (that is not what is tested here).

describe('review: a bucket key of the wrong type, on_unavailable: open', () => {
  it('admits a burst-30 key at most its burst plus a second of refill, though Redis answers every call with WRONGTYPE', async () => {
    const f = await onRedis.instance({ coordination: { on_unavailable: 'open', timeout_ms: 10_000 }, start: true });
    const k = keyRecord('garbage', 'production', { limit: 30, burst: 30, window: 'day' });
    // One decision makes the bucket; then the attacker turns it (and its lease set) into strings.
    expect(await hammer(f.limiter, k, 1, 1)).toBe(1);
    const cli = onRedis.redis().cli;
    const names = (await cli('--scan', '--pattern', '*wg:b:*')).split('\n').filter(Boolean);
    expect(names.length).toBeGreaterThan(0);
    for (const n of names) {
      await cli('DEL', n);
      await cli('SET', n, 'garbage');
    }
    await new Promise((r) => setTimeout(r, 1200)); // the first lease ends, as any would
    const admitted = 1 + (await hammer(f.limiter, k, 200, 4));
    const up = (await f.metrics.coordinationUp.get()).values[0]?.value;
    // Redis answered every call: it is up, and the key stays within its burst (plus 30/day of refill).
    expect(up).toBe(1);
    expect(admitted, `admitted ${admitted} of 201 requests of a burst-30 key`).toBeLessThanOrEqual(31);
  }, 60_000);

  it("a key whose bucket is intact is not unlimited because another key's bucket (the attacker's own) is of the wrong type", async () => {
    const f = await onRedis.instance({ coordination: { on_unavailable: 'open', timeout_ms: 10_000 }, start: true });
    const mine = keyRecord('attackers-own', 'production', { limit: 30, burst: 30, window: 'day' });
    const victim = keyRecord('someone-else', 'production', { limit: 30, burst: 30, window: 'day' });
    expect(await hammer(f.limiter, mine, 1, 1)).toBe(1);
    const cli = onRedis.redis().cli;
    const names = (await cli('--scan', '--pattern', '*wg:b:k:attackers-own*')).split('\n').filter(Boolean);
    expect(names.length).toBeGreaterThan(0);
    for (const n of names) {
      await cli('DEL', n);
      await cli('SET', n, 'garbage');
    }
    await new Promise((r) => setTimeout(r, 1200));
    // The attacker sends one request of their own key now and then; the victim's key is busy.
    let victimAdmitted = 0;
    for (let round = 0; round < 20; round++) {
      await hammer(f.limiter, mine, 1, 1);
      victimAdmitted += await hammer(f.limiter, victim, 10, 1);
    }
    expect(victimAdmitted, `victim key of burst 30 admitted ${victimAdmitted} of 200`).toBeLessThanOrEqual(31);
  }, 60_000);
});
