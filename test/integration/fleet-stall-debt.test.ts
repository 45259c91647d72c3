import { describe, expect, it } from 'vitest';
import { Coordinator } from '../../src/fleet/redis.js';
import { createLogger } from '../../src/log.js';
import { createMetrics, registerCoordination } from '../../src/metrics/index.js';
import { fleetOnRedis, hammer } from '../helpers/fleet.js';
import { keyRecord } from '../helpers/keys.js';

/**
 * A short stall of Redis (slower than timeout_ms, then answering again): while it is
 * late each instance admits from its share (on_unavailable: local), and when it answers
 * that spending is charged to the shared bucket, so the fleet admits one bucket over
 * the stall and after it, not one during and another after.
 */
const fleet = fleetOnRedis();
/** An instance of a fleet of two, late after 50 ms, its sweep running. */
const instance = () => fleet.instance({ coordination: { timeout_ms: 50 }, instances: () => 2, start: true });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a short stall of Redis (on_unavailable: local)', () => {
  it('admits one bucket over the stall and after it: what the shares admitted is charged when Redis answers', async () => {
    const [a, b] = [await instance(), await instance()];
    const k = keyRecord('stall', 'production', { limit: 300, burst: 300, window: 'day' });
    // Scripts loaded, and each instance has heard how much the bucket holds.
    let total = (await hammer(a.limiter, k, 1)) + (await hammer(b.limiter, k, 1));
    // Their leases go back idle: each share is then cut from no more than the bucket holds
    // (a share is cut from what its instance last heard the bucket held; a lease taken by
    // another since makes that stale by the lease, a looseness of the share, not of this).
    await sleep(400);
    // Redis asleep for 2 s: wait until a PING is late, from a connection of the test's own.
    const m = createMetrics({ process: false });
    registerCoordination(m);
    const probe = new Coordinator({ url: fleet.redis().url, timeoutMs: 30, log: createLogger('silent'), metrics: m });
    await probe.start();
    const sleeping = fleet.redis().cli('DEBUG', 'SLEEP', '2');
    const until = performance.now() + 3000;
    while (performance.now() < until) {
      try {
        await probe.command(['PING'], 'ping');
        await sleep(10);
      } catch {
        break;
      }
    }
    const during = (await hammer(a.limiter, k, 400)) + (await hammer(b.limiter, k, 400));
    total += during;
    const admittedLocally = async (x: typeof a) =>
      (await x.metrics.coordinationUnavailable.get()).values.find((v) => v.labels.outcome === 'admitted')?.value ?? 0;
    // The stall was seen: each instance admitted from its share of what the bucket held.
    expect((await admittedLocally(a)) + (await admittedLocally(b))).toBeGreaterThan(200);
    await sleeping;
    await probe.close();
    // Redis answers again; a second for the sweeps (b's debt too, though its requests stop).
    await sleep(1000);
    const after = (await hammer(a.limiter, k, 400)) + (await hammer(b.limiter, k, 400));
    total += after;
    const told = `admitted: ${total - during - after} before, ${during} during the stall, ${after} after`;
    // One bucket (300, its refill over seconds is a hundredth of a token), not 300 during and ~280 after.
    expect(total, told).toBeLessThanOrEqual(301);
    expect(total, told).toBeGreaterThanOrEqual(250);
  }, 60_000);

  it("charges what the shares admitted while Redis was down to its bucket when it is back, an idle instance's too", async () => {
    const [a, b] = [await instance(), await instance()];
    const k = keyRecord('down', 'production', { limit: 300, burst: 300, window: 'day' });
    await hammer(a.limiter, k, 1);
    await hammer(b.limiter, k, 1);
    await sleep(400);
    await fleet.redis().stop();
    const during = (await hammer(a.limiter, k, 400)) + (await hammer(b.limiter, k, 400));
    expect(during).toBeGreaterThan(200);
    // Back, empty (a fresh bucket): b takes no request, its sweep charges what it admitted.
    await fleet.redis().start();
    const until = performance.now() + 5000;
    while (!(a.co.ready && b.co.ready) && performance.now() < until) await sleep(20);
    await sleep(500);
    const after = await hammer(a.limiter, k, 400);
    // One bucket over the outage and after it (the fresh bucket's 300, less what the shares admitted).
    expect(after, `${during} admitted while Redis was down, ${after} after`).toBeLessThanOrEqual(300 - during + 1);
  }, 60_000);
});
