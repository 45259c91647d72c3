import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { EventRecord } from '../../src/events/event.js';
import { FleetQueue } from '../../src/fleet/delivery-queue.js';
import { DeliveryLeases } from '../../src/fleet/dispatch.js';
import { Coordinator } from '../../src/fleet/redis.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics, registerCoordination } from '../../src/metrics/index.js';
import { pendingDelivery } from '../../src/webhooks/delivery.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { EndpointService } from '../../src/webhooks/endpoints.js';
import { FanOut } from '../../src/webhooks/fanout.js';
import type { DeliveryRecord, EndpointRecord } from '../../src/webhooks/records.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { answer, endpoint, MemoryRows, webhooksConfig } from '../helpers/webhook-fakes.js';

// Regression tests from a review of webhook delivery (2026-11-28).

/*
 * Review (webhooks, fleet): each instance keeps its own mirror of the endpoints, refreshed by an
 * announcement over Redis and a poll (storage.key_poll_interval_ms, 1 s). Any instance may attempt
 * any delivery (a lease in Redis). The dispatcher dead-letters a delivery, for good and unsent,
 * when ITS mirror says the endpoint is unknown or not enabled, without reading storage.
 *
 * Here: two instances A and B on a real redis-server, one storage (in memory) for endpoints and
 * deliveries. The operator follows the docs ("enable the endpoint first, PATCH status: enabled")
 * on A, then replays a dead-lettered delivery on A. B, whose mirror has not polled yet (it would
 * within a second), is the instance that claims the replay's attempt.
 */

class SharedEndpointTable {
  readonly rows = new Map<string, EndpointRecord>();
  async put(e: EndpointRecord): Promise<void> {
    this.rows.set(e.id, { ...e });
  }
  async changedSince(since: number): Promise<EndpointRecord[]> {
    return [...this.rows.values()].filter((e) => e.updated_at >= since).map((e) => ({ ...e }));
  }
}

describe('a fleet instance with a stale endpoint mirror', () => {
  let redis: TestRedis;
  const cleanup: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const c of cleanup.reverse()) await c().catch(() => {});
    await redis?.stop();
  });

  it('a replay right after the endpoint is re-enabled is sent, not dead-lettered unsent by an instance that has not polled yet', async () => {
    const clock = new ManualClock();
    const cfg = webhooksConfig({ jitter: 0 });
    const prefix = `rv${process.pid}:`;
    const rows = new MemoryRows();
    const table = new SharedEndpointTable();
    const instance = async () => {
      const metrics = createMetrics({ process: false });
      registerCoordination(metrics);
      const co = new Coordinator({ url: redis.url, timeoutMs: 1000, log: silentLogger, metrics, prefix });
      await co.start();
      const queue = new FleetQueue({
        rows,
        leases: new DeliveryLeases(co, 60_000),
        spool: null,
        clock,
        log: silentLogger,
      });
      const endpoints = new EndpointService({
        cfg,
        table,
        events: { emit: () => ({}) as never },
        clock,
        log: silentLogger,
        announce: null,
      });
      cleanup.push(async () => {
        queue.stop();
        await queue.flush();
        await co.close();
      });
      return { co, queue, endpoints, metrics };
    };
    const a = await instance();
    const b = await instance();

    // The endpoint exists, disabled (as it was when both instances last read it).
    const ep = endpoint('we_reenabled0000000000', { status: 'disabled', disabled_at: clock.now() - 1000 });
    await table.put(ep);
    await a.endpoints.load();
    await b.endpoints.load();
    expect(b.endpoints.get(ep.id)?.status).toBe('disabled');

    // On A: PATCH status enabled (written to storage), then the replay of one of its deliveries.
    await a.endpoints.update(ep.id, 'production', { status: 'enabled' });
    expect(a.endpoints.get(ep.id)?.status).toBe('enabled');
    const replay: DeliveryRecord = {
      ...pendingDelivery(
        {
          environment: 'production',
          endpoint_id: ep.id,
          event_id: 'evt_replayed',
          event_type: 'key.rotated',
          payload: '{"id":"evt_replayed"}',
          max_attempts: 8,
        },
        clock.now(),
      ),
      is_replay: true,
      replay_of: 'dlv_original',
    };
    await a.queue.add([replay]);

    // B takes it in (its scan) and attempts it before its next endpoint poll.
    const sent: string[] = [];
    const dispatcherB = new Dispatcher({
      cfg,
      queue: b.queue,
      endpoints: b.endpoints,
      send: async (d) => {
        sent.push(d.id);
        return answer(204);
      },
      clock,
      log: silentLogger,
      metrics: b.metrics,
    });
    cleanup.push(() => dispatcherB.stop());
    await b.queue.scan();
    dispatcherB.tick();
    await dispatcherB.idle();
    // B's mirror catches up (its poll), and it keeps working for a while.
    await b.endpoints.poll();
    expect(b.endpoints.get(ep.id)?.status).toBe('enabled');
    for (let i = 0; i < 5; i++) {
      clock.advance(10_000);
      await b.queue.scan();
      dispatcherB.tick();
      await dispatcherB.idle();
    }

    // The receiver must get the replay: the endpoint was enabled before it was made.
    expect({ sent: sent.length, status: rows.get(replay.id).status, note: rows.get(replay.id).response_body }).toEqual({
      sent: 1,
      status: 'delivered',
      note: '',
    });
  });

  it('the fan-out leader makes the deliveries of an event raised after an endpoint was registered on another instance', async () => {
    const clock = new ManualClock();
    const cfg = webhooksConfig({ jitter: 0, allow_private_networks: true });
    const table = new SharedEndpointTable();
    const service = () =>
      new EndpointService({
        cfg,
        table,
        events: { emit: () => ({}) as never },
        clock,
        log: silentLogger,
        announce: null,
      });
    const a = service();
    const b = service();
    await a.load();
    await b.load();
    // Registered on A (POST /v2/webhooks/endpoints answered 201).
    const ep = await a.create({ url: 'https://hooks.example.com/wakegate', events: ['key.rotated'] }, 'production');
    // 100 ms later, an event it subscribed to is raised and recorded (any instance).
    clock.advance(100);
    const events: (EventRecord & { recorded_at: number })[] = [
      {
        id: 'evt_after_registration',
        type: 'key.rotated',
        environment: 'production',
        created_at: clock.now(),
        data: '{}',
        recorded_at: clock.now(),
      },
    ];
    const made: DeliveryRecord[] = [];
    let cursor: number | null = null;
    // B leads the fan-out (one instance at a time does); its mirror has not polled since the registration.
    const fanout = new FanOut({
      cfg,
      events: {
        serverNow: async () => clock.now(),
        recordedAfter: async (t, id) =>
          events.filter((e) => e.recorded_at > t || (e.recorded_at === t && e.id > id)).slice(0, 2000),
      },
      deliveries: { existingPairs: async () => new Set<string>() },
      endpoints: b,
      dispatcher: {
        queued: 0,
        add: async (rows) => {
          made.push(...rows);
          return rows.length;
        },
      },
      clock,
      log: silentLogger,
      metrics: createMetrics({ process: false }),
      cursors: {
        get: async () => cursor,
        set: async (_i, t) => {
          cursor = t;
        },
      },
      leader: null,
    });
    await fanout.init();
    clock.advance(150);
    await fanout.poll();
    // B's mirror catches up (its announcement or its 1 s poll), and the fan-out goes on polling.
    await b.poll();
    expect(b.get(ep.id)).toBeDefined();
    for (let i = 0; i < 4; i++) {
      clock.advance(250);
      await fanout.poll();
    }
    expect(made.filter((d) => d.endpoint_id === ep.id).map((d) => d.event_id)).toEqual(['evt_after_registration']);
  });
});
