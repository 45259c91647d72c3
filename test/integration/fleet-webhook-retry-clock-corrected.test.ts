// Regression tests from a review of time handling (2026-11-27).
// A retry scheduled while the clock ran far ahead, in a fleet: its due time is the fleet
// queue's (Redis), so putting it back within the schedule is done there (fleet/dispatch.ts
// RETIME), by the later of Redis's clock and the instance's.
import { randomBytes } from 'node:crypto';
import { createClient, type RedisClientType } from '@redis/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { FleetQueue } from '../../src/fleet/delivery-queue.js';
import { DeliveryLeases } from '../../src/fleet/dispatch.js';
import { Coordinator } from '../../src/fleet/redis.js';
import { newSecret } from '../../src/ids.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics, registerCoordination } from '../../src/metrics/index.js';
import { pendingDelivery } from '../../src/webhooks/delivery.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import type { DeliveryRecord } from '../../src/webhooks/records.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { answer, endpoint, endpointService, MemoryRows, webhooksConfig } from '../helpers/webhook-fakes.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

let redis: TestRedis;
let inspect: RedisClientType;
beforeAll(async () => {
  redis = await startRedis();
  inspect = createClient({ url: redis.url }) as RedisClientType;
  inspect.on('error', () => {});
  await inspect.connect();
});
afterAll(async () => {
  await inspect?.close().catch(() => {});
  await redis?.stop();
});

/** What Redis holds of a delivery: its state and its place in the due set. */
async function inRedis(prefix: string, id: string) {
  const [state, due] = await Promise.all([
    inspect.sendCommand(['GET', `${prefix}wh:d:${id}`]) as Promise<string | null>,
    inspect.sendCommand(['ZSCORE', `${prefix}wh:due`, id]) as Promise<string | null>,
  ]);
  return {
    state: state === null ? null : (JSON.parse(state) as { attempt?: number; next_attempt_at: number | null }),
    due: due === null ? null : Number(due),
  };
}

// Review (time): two gateways on one Redis and one storage, both started with their clock
// 30 days ahead (the clock injected is theirs; Redis's and the storage's are the host's).
describe('review-time: a fleet retry scheduled while the clock was far ahead, once the clock is put right', () => {
  const admin = `svc_live_${newSecret()}`;
  let storage: HttpStorage;
  let origin: TestServer;
  let rx: Receiver;
  const gws: TestGateway[] = [];
  const clock = new ManualClock(Date.now() + 30 * DAY);

  beforeAll(async () => {
    storage = await startHttpStorage();
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(500);
      res.end('x');
    });
    rx = await startReceiver(clock);
    const values = {
      storage: {
        clickhouse_url: storage.url,
        encryption_key: randomBytes(32).toString('base64'),
        key_poll_interval_ms: 200,
      },
      coordination: { redis_url: redis.url, timeout_ms: 500 },
      routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
      webhooks: { allow_insecure_http: true, allow_private_networks: true, jitter: 0, timeout_ms: 300 },
    };
    gws.push(await startGateway(values, { admin, clock }));
    gws.push(await startGateway(values, { admin, clock }));
  }, 120_000);
  afterAll(async () => {
    for (const g of gws) await g.cleanup();
    await Promise.all([storage?.stop(), origin?.close(), rx?.close()]);
  }, 60_000);

  it('the retry after a 503 comes the wait it was given (5 s) after the correction: not sooner, not 30 days later', async () => {
    const [g1] = gws as [TestGateway, TestGateway];
    rx.answer = (_req, res, n) => {
      res.writeHead(n === 1 ? 503 : 200);
      res.end('');
    };
    const reg = await fetch(`${g1.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...bearer(admin), 'content-type': 'application/json' },
      body: JSON.stringify({ url: rx.url, events: ['wake.error'] }),
    });
    expect(reg.status).toBe(201);
    // The other instance hears of the endpoint (announced through Redis).
    await pause(500);
    const res = await fetch(`${g1.url}/api/fail`);
    expect(res.status).toBe(500);
    await res.arrayBuffer();
    await rx.waitFor(1, 15_000);
    const deliveries = async () =>
      (
        (await (await fetch(`${g1.url}/v2/webhooks/deliveries?limit=10`, { headers: bearer(admin) })).json()) as {
          data: { id: string; attempt: number; status: string; next_attempt_at: string | null }[];
        }
      ).data;
    await until(async () => (await deliveries())[0]?.status === 'failed', 10_000, 'the first outcome stored');
    const [d] = await deliveries();
    expect(d).toMatchObject({ attempt: 1, status: 'failed' });
    // The fleet's queue has the retry 30 days out (5 s after the first attempt, by the clock then).
    const before = await inRedis('wakegate:', d?.id as string);
    expect(before.due).toBeGreaterThan(Date.now() + 29 * DAY);

    // NTP puts the clock right on both hosts. The fleet's scans (every 2 s) and ticks run.
    const correctedAt = Date.now();
    clock.set(correctedAt);
    await pause(2500);
    // 4 s after the correction: the wait given (5 s) has not gone by since.
    clock.set(correctedAt + 4_000);
    await pause(500);
    expect(rx.got, 'attempt 2 made before the wait it was given had gone by').toHaveLength(1);
    const moved = await inRedis('wakegate:', d?.id as string);
    expect(moved.due, 'the fleet queue still has the retry 30 days out').toBeLessThan(Date.now() + 5_000 + 1_000);
    expect(moved.due).toBeGreaterThanOrEqual(correctedAt + 5_000);

    // 5 s after now on the host's clock (Redis's, which the fleet goes by too): it comes.
    clock.set(Date.now() + 5_000);
    const deadline = Date.now() + 3000;
    while (rx.got.length < 2 && Date.now() < deadline) await pause(20);
    expect(
      rx.got.length,
      `attempt 2 never made after the correction: the fleet has it due at ${new Date((await inRedis('wakegate:', d?.id as string)).due ?? 0).toISOString()}`,
    ).toBe(2);
    await until(async () => (await deliveries())[0]?.status === 'delivered', 10_000, 'attempt 2 stored');
    expect((await deliveries())[0]).toMatchObject({ attempt: 2, status: 'delivered' });
  }, 60_000);
});

/*
 * The rule on the fleet queue alone: FleetQueues (each with its own Coordinator, as an
 * instance has) on the same Redis and in-memory storage, driven by dispatchers whose clock
 * the test sets; Redis's clock is the host's.
 */
describe('review-time: fleet retries due further ahead than the schedule allows', () => {
  let fleets = 0;
  const stops: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const s of stops.reverse()) await s().catch(() => {});
  });

  /** An instance on `clock`: its queue (on the fleet `prefix`, over `rows`) and a dispatcher sending through `respond`. */
  async function instance(prefix: string, rows: MemoryRows, clock: ManualClock, respond = () => answer(200)) {
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
    const cfg = webhooksConfig({ jitter: 0 });
    const sent: { id: string; attempt: number }[] = [];
    const dispatcher = new Dispatcher({
      cfg,
      queue,
      endpoints: endpointService(cfg, clock, [endpoint('we_a')]).service,
      send: async (d, attempt) => {
        sent.push({ id: d.id, attempt });
        return respond();
      },
      clock,
      log: silentLogger,
      metrics: createMetrics({ process: false }),
    });
    stops.push(async () => {
      await dispatcher.stop();
      await co.close();
    });
    /** A tick of the dispatcher, the attempts it started, their outcomes. */
    const step = async () => {
      dispatcher.tick();
      await dispatcher.idle();
    };
    return { co, queue, dispatcher, sent, step };
  }

  function delivery(clock: ManualClock, over: Partial<DeliveryRecord> = {}): DeliveryRecord {
    const d = pendingDelivery(
      {
        environment: 'production',
        endpoint_id: 'we_a',
        event_id: `evt_${randomBytes(4).toString('hex')}`,
        event_type: 'wake.error',
        payload: '{}',
        max_attempts: 8,
      },
      clock.now(),
    );
    return { ...d, id: `dlv_${randomBytes(6).toString('hex')}`, ...over };
  }

  it('an instance whose clock was ahead left retries no instance holds: a scan puts each back within the schedule', async () => {
    const prefix = `fr${++fleets}_${process.pid}:`;
    const rows = new MemoryRows();
    const now = Date.now();
    // A, 30 days ahead, made the deliveries and attempted some, then went away.
    const aheadClock = new ManualClock(now + 30 * DAY);
    const a = await instance(prefix, rows, aheadClock, () => answer(500));
    const tried = delivery(aheadClock);
    const fresh = delivery(aheadClock);
    await a.queue.add([tried]);
    await a.step();
    expect(a.sent).toEqual([{ id: tried.id, attempt: 1 }]);
    expect((await inRedis(prefix, tried.id)).due).toBe(now + 30 * DAY + 5_000);
    // One never attempted (its endpoint was busy): due when made, 30 days out.
    await rows.put([fresh]);
    await new DeliveryLeases(a.co, 60_000).add([fresh]);
    // One whose wait Redis was not given (as when the queue is filled from storage): the
    // longest the schedule allows then (a day: no step with jitter is longer).
    const unknown = delivery(aheadClock, { attempt: 2, status: 'failed', response_status: 500 });
    unknown.next_attempt_at = now + 30 * DAY + 300_000;
    await rows.put([unknown]);
    await new DeliveryLeases(a.co, 60_000).add([unknown]);
    // And one due in 9 h, which a correct clock could have set: left as it is.
    const within = delivery(aheadClock, { attempt: 7, status: 'failed', next_attempt_at: now + 9 * HOUR });
    await rows.put([within]);
    await new DeliveryLeases(a.co, 60_000).add([within]);
    await a.dispatcher.stop();

    // B, its clock right, holds none of them (its scan takes in only what is due soon).
    const clock = new ManualClock(now);
    const b = await instance(prefix, rows, clock);
    await b.step();
    const from = Date.now();
    await b.queue.scan();
    const to = Date.now();
    const at = async (d: DeliveryRecord) => (await inRedis(prefix, d.id)).due as number;
    expect(await at(tried)).toBeGreaterThanOrEqual(from + 5_000);
    expect(await at(tried)).toBeLessThanOrEqual(to + 5_000);
    expect(await at(fresh)).toBeGreaterThanOrEqual(from);
    expect(await at(fresh)).toBeLessThanOrEqual(to);
    expect(await at(unknown)).toBeGreaterThanOrEqual(from + DAY);
    expect(await at(unknown)).toBeLessThanOrEqual(to + DAY);
    expect(await inRedis(prefix, within.id)).toEqual({
      state: { attempt: 7, next_attempt_at: now + 9 * HOUR },
      due: now + 9 * HOUR,
    });
    expect((await inRedis(prefix, tried.id)).state).toMatchObject({ attempt: 1, next_attempt_at: await at(tried) });

    // B attempts each at its new time, not before.
    clock.set(Date.now());
    await b.queue.scan();
    await b.step();
    expect(b.sent).toEqual([{ id: fresh.id, attempt: 1 }]);
    clock.set((await at(tried)) - 1);
    await b.queue.scan();
    await b.step();
    expect(b.sent).toHaveLength(1);
    clock.set(await at(tried));
    await b.queue.scan();
    await b.step();
    expect(b.sent).toEqual([
      { id: fresh.id, attempt: 1 },
      { id: tried.id, attempt: 2 },
    ]);
    expect(rows.get(tried.id)).toMatchObject({ status: 'delivered', attempt: 2 });
  });

  it("an instance whose clock is behind pulls no retry forward: the fleet's now is the later of Redis's clock and its own", async () => {
    const prefix = `fr${++fleets}_${process.pid}:`;
    const rows = new MemoryRows();
    const now = Date.now();
    // A, its clock right, attempted a delivery: retried in 5 min.
    const a = await instance(prefix, rows, new ManualClock(now), () => answer(500));
    const d = delivery(new ManualClock(now), { next_attempt_at: now });
    await a.queue.add([d]);
    a.dispatcher.tick();
    await a.dispatcher.idle();
    // Attempt 1 failed, retried 5 s later; attempt 2 failed too: 5 min later.
    const c = new ManualClock(now + 5_000);
    const a2 = await instance(prefix, rows, c, () => answer(500));
    await a2.queue.scan();
    await a2.step();
    expect(a2.sent).toEqual([{ id: d.id, attempt: 2 }]);
    const due = now + 5_000 + 300_000;
    expect((await inRedis(prefix, d.id)).due).toBe(due);
    await a.dispatcher.stop();
    await a2.dispatcher.stop();

    // B's clock is 30 days behind: by it, the retry is further ahead than any wait.
    const b = await instance(prefix, rows, new ManualClock(now - 30 * DAY));
    await b.queue.scan();
    await b.step();
    await b.queue.scan();
    await b.step();
    expect(await inRedis(prefix, d.id)).toMatchObject({ state: { attempt: 2, next_attempt_at: due }, due });
    expect(b.sent).toEqual([]);
  });
});
