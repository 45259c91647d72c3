import { randomBytes } from 'node:crypto';
import { createClient, type RedisClientType } from '@redis/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { FleetQueue } from '../../src/fleet/delivery-queue.js';
import { DeliveryLeases } from '../../src/fleet/dispatch.js';
import { Coordinator } from '../../src/fleet/redis.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics, registerCoordination } from '../../src/metrics/index.js';
import { pendingDelivery } from '../../src/webhooks/delivery.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { MemoryRows } from '../helpers/webhook-fakes.js';

/**
 * CLAIM (Lua) took a state whose next_attempt_at is a numeric *string* (or 1e400) as a
 * due time and answered 'later', while withState (JS) ignores such a due time and hands
 * back the caller's copy, due now: the dispatcher claimed it again at once, round trip
 * after round trip, for as long as Redis held that value. Both sides now read a due
 * time alike (a finite number); anything else is an altered state.
 */
let redis: TestRedis;
let attacker: RedisClientType;
let co: Coordinator;
beforeAll(async () => {
  redis = await startRedis();
  attacker = createClient({ url: redis.url }) as RedisClientType;
  attacker.on('error', () => {});
  await attacker.connect();
});
afterAll(async () => {
  await attacker?.close().catch(() => {});
  await co?.close();
  await redis?.stop();
});

describe('a delivery state with a due time Lua reads and JS does not', () => {
  for (const bad of ['"99999999999999"', '1e400']) {
    it(`does not re-claim in a loop when next_attempt_at is ${bad}`, async () => {
      const metrics = createMetrics({ process: false });
      registerCoordination(metrics);
      co?.close();
      co = new Coordinator({
        url: redis.url,
        timeoutMs: 1000,
        log: silentLogger,
        metrics,
        prefix: `cs${randomBytes(3).toString('hex')}:`,
      });
      await co.start();
      const clock = new ManualClock();
      const queue = new FleetQueue({
        rows: new MemoryRows(),
        leases: new DeliveryLeases(co, 60_000),
        spool: null,
        clock,
        log: silentLogger,
      });
      const d = {
        ...pendingDelivery(
          {
            environment: 'production',
            endpoint_id: 'we_a',
            event_id: 'evt_1',
            event_type: 'wake.error',
            payload: '{}',
            max_attempts: 8,
          },
          clock.now(),
        ),
        id: `dlv_${randomBytes(4).toString('hex')}`,
      };
      await queue.add([d]);
      await attacker.set(co.key(`wh:d:${d.id}`), `{"attempt":0,"next_attempt_at":${bad}}`);
      // What the dispatcher does (tick -> run -> claim -> finally tick), for 300 ms of real time.
      let claims = 0;
      const end = Date.now() + 300;
      while (Date.now() < end) {
        const due = queue.due(clock.now(), () => true);
        if (due.length === 0) break;
        for (const x of due) {
          claims++;
          await queue.claim(x);
        }
      }
      console.log(bad, 'claims in 300 ms:', claims);
      queue.stop();
      expect(claims).toBeLessThanOrEqual(2);
    });
  }
});
