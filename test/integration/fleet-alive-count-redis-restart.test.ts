// Regression tests from a review of the fleet on Redis (2026-11-28).
import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { Heartbeat } from '../../src/fleet/alive.js';
import { fleetOnRedis, settle } from '../helpers/fleet.js';
import { keyRecord } from '../helpers/keys.js';
import { startRedis } from '../helpers/redis.js';

/*
 * Review (fleet on Redis): DESIGN "When Redis cannot answer, on_unavailable: local ... each
 * instance enforces each bucket locally at its share (the bucket's rate and burst divided by
 * the instances seen alive in the last minute)". Heartbeat.beat() takes whatever count the
 * last ALIVE call returned, even one made just after Redis restarted empty (the set of
 * instances is gone): the first instance to beat then splits by 1 although it saw 3 alive
 * seconds ago. If Redis goes away again before the others beat (a flapping Redis, a host
 * that restarts it twice), that instance admits the whole bucket: the fleet admits ~3 buckets.
 */
const onRedis = fleetOnRedis();
const key = (id: string, rl: KeyRecord['rate_limit']): KeyRecord => keyRecord(id, 'production', rl);

describe('review: the count of instances across a Redis that restarts empty', () => {
  it('an instance that beats first after the restart still splits by the instances seen alive in the last minute', async () => {
    const r = await startRedis();
    try {
      const beats: Heartbeat[] = [];
      const fleet = [];
      for (let i = 0; i < 3; i++) {
        const f = await onRedis.instance({ url: r.url, instances: () => beats[i]?.instances ?? 1, start: true });
        fleet.push(f);
        beats.push(new Heartbeat(f.co));
      }
      for (const b of beats) await b.beat();
      for (const b of beats) expect(await b.beat()).toBe(3);

      // Redis restarts empty (its host killed it); the first instance reconnects and beats.
      await r.stop();
      await r.start();
      const t0 = Date.now();
      while (!fleet.every((f) => f.co.ready) && Date.now() - t0 < 10_000) await new Promise((s) => setTimeout(s, 50));
      expect(fleet.every((f) => f.co.ready)).toBe(true);
      await beats[0]?.beat();
      // Seconds ago three were alive: the count to split by is still 3.
      const counted = beats[0]?.instances;

      // And Redis goes away again before the others beat.
      await r.stop();
      const k = key('flap', { limit: 30, burst: 30, window: 'day' });
      const a = fleet[0] as (typeof fleet)[number];
      let admitted = 0;
      for (let i = 0; i < 40; i++) if ((await settle(a.limiter.check(k, '', null, Date.now()))).allowed) admitted++;
      expect({ counted, admitted }).toEqual({ counted: 3, admitted: 10 });
    } finally {
      await r.stop();
    }
  }, 60_000);
});
