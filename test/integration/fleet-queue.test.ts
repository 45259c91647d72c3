import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { createClient, type RedisClientType } from '@redis/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { FleetQueue } from '../../src/fleet/delivery-queue.js';
import { DeliveryLeases } from '../../src/fleet/dispatch.js';
import { Coordinator } from '../../src/fleet/redis.js';
import { createLogger, type Logger, silentLogger } from '../../src/log.js';
import { createMetrics, registerCoordination } from '../../src/metrics/index.js';
import { pendingDelivery } from '../../src/webhooks/delivery.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import type { DeliveryRecord } from '../../src/webhooks/records.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { answer, endpoint, endpointService, MemoryRows, webhooksConfig } from '../helpers/webhook-fakes.js';

/*
 * FleetQueue, the webhook delivery queue a fleet of gateways shares through Redis,
 * against a real redis-server on a loopback port. Each "gateway" here is a FleetQueue
 * with its own Coordinator (its own connection and lease owner) on the same Redis and
 * the same storage (in-memory rows, as the fleet shares ClickHouse), all on one manual
 * clock. Due times follow that clock; only a lease's expiry is Redis's own (PX, real
 * time), so the takeover tests use a short lease and bounded polling.
 */

let redis: TestRedis;
let inspect: RedisClientType;
const cleanup: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  redis = await startRedis();
  inspect = createClient({ url: redis.url }) as RedisClientType;
  inspect.on('error', () => {});
  await inspect.connect();
});
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => {});
});
afterAll(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => {});
  await inspect?.close().catch(() => {});
  await redis?.stop();
});

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `cond` every 20 ms for at most `ms`; fails the test when it never holds. */
async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await pause(20);
  }
}

interface Fleet {
  prefix: string;
  rows: MemoryRows;
  clock: ManualClock;
}

let fleets = 0;
/** A fleet of its own: its own key prefix in Redis, its own storage, its own clock. */
function fleet(): Fleet {
  return { prefix: `fq${++fleets}_${process.pid}:`, rows: new MemoryRows(), clock: new ManualClock() };
}

interface Gateway {
  co: Coordinator;
  queue: FleetQueue;
  /** Calls this instance has made to Redis for the queue (wakegate_coordination_round_trips_total{op="lease"}). */
  leaseCalls(): Promise<number>;
}

/** One instance of the fleet: a Coordinator of its own and a FleetQueue on it. */
async function gateway(f: Fleet, o: { leaseMs?: number; url?: string; log?: Logger } = {}): Promise<Gateway> {
  const metrics = createMetrics({ process: false });
  registerCoordination(metrics);
  const co = new Coordinator({
    url: o.url ?? redis.url,
    timeoutMs: 1000,
    log: silentLogger,
    metrics,
    prefix: f.prefix,
  });
  await co.start();
  expect(co.ready).toBe(true);
  const queue = new FleetQueue({
    rows: f.rows,
    leases: new DeliveryLeases(co, o.leaseMs ?? 60_000),
    spool: null,
    clock: f.clock,
    log: o.log ?? silentLogger,
  });
  cleanup.push(async () => {
    queue.stop();
    await queue.flush();
    await co.close();
  });
  const leaseCalls = async () =>
    (await metrics.coordinationRoundTrips.get()).values.find((v) => v.labels.op === 'lease')?.value ?? 0;
  return { co, queue, leaseCalls };
}

let made = 0;
/** A new delivery, due now on the fleet's clock unless `over` says otherwise. */
function delivery(f: Fleet, over: Partial<DeliveryRecord> = {}): DeliveryRecord {
  const n = ++made;
  const d = pendingDelivery(
    {
      environment: 'production',
      endpoint_id: 'we_a',
      event_id: `evt_${n}`,
      event_type: 'wake.error',
      payload: JSON.stringify({ n }),
      max_attempts: 8,
    },
    f.clock.now(),
  );
  return { ...d, id: `dlv_${n}_${randomBytes(4).toString('hex')}`, ...over };
}

/** A new fleet of two instances, A and B. */
async function twoGateways(): Promise<{ f: Fleet; a: Gateway; b: Gateway }> {
  const f = fleet();
  return { f, a: await gateway(f), b: await gateway(f) };
}

/** `g` scans and claims what falls due (as its timer would every 2 s) until it holds a lease another instance let expire. */
async function takeOver(f: Fleet, g: Gateway, what: string): Promise<DeliveryRecord | null> {
  let got: DeliveryRecord | null = null;
  await until(
    async () => {
      await g.queue.scan();
      for (const x of g.queue.due(f.clock.now(), all)) got = (await g.queue.claim(x)) ?? got;
      return got !== null;
    },
    what,
    10_000,
  );
  return got;
}

/** The outcome of an attempt of `d` that failed, to be retried at `next`. */
const failed = (d: DeliveryRecord, next: number): DeliveryRecord => ({
  ...d,
  attempt: d.attempt + 1,
  status: 'failed',
  response_status: 500,
  next_attempt_at: next,
});
/** The outcome of an attempt of `d` that was delivered. */
const delivered = (d: DeliveryRecord): DeliveryRecord => ({
  ...d,
  attempt: d.attempt + 1,
  status: 'delivered',
  response_status: 204,
  next_attempt_at: null,
});

/** Room for everything (the dispatcher's caps are not under test here). */
const all = () => true;

/** What Redis holds of a delivery: its state, its place in the due set, and its lease's holder. */
async function inRedis(f: Fleet, id: string) {
  const [state, due, lease] = await Promise.all([
    inspect.sendCommand(['GET', `${f.prefix}wh:d:${id}`]) as Promise<string | null>,
    inspect.sendCommand(['ZSCORE', `${f.prefix}wh:due`, id]) as Promise<string | null>,
    inspect.sendCommand(['GET', `${f.prefix}wh:l:${id}`]) as Promise<string | null>,
  ]);
  return {
    state: state === null ? null : (JSON.parse(state) as { attempt?: number; next_attempt_at: number | null }),
    due: due === null ? null : Number(due),
    lease,
  };
}

/** A deterministic shuffle (a small LCG), so claims from the instances interleave. */
function shuffled<T>(xs: T[], seed = 7): T[] {
  const out = [...xs];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * Every instance hands out what it holds due by `now`, and all claim at once,
 * interleaved. The winners of each delivery (the instance's index and the copy to attempt).
 */
async function race(gs: Gateway[], now: number): Promise<Map<string, { k: number; d: DeliveryRecord }[]>> {
  const taken = gs.flatMap((g, k) => g.queue.due(now, all).map((d) => ({ k, d })));
  const results = await Promise.all(
    shuffled(taken).map(async ({ k, d }) => ({ k, id: d.id, got: await (gs[k] as Gateway).queue.claim(d) })),
  );
  const winners = new Map<string, { k: number; d: DeliveryRecord }[]>();
  for (const r of results) {
    const list = winners.get(r.id) ?? [];
    if (r.got) list.push({ k: r.k, d: r.got });
    winners.set(r.id, list);
  }
  return winners;
}

describe('FleetQueue: a delivery is leased to one instance of the fleet at a time', () => {
  it('what one instance adds another takes in by its scan, and only one of their claims wins', async () => {
    const { f, a, b } = await twoGateways();
    const t0 = f.clock.now();
    const d = delivery(f);
    await a.queue.add([d]);
    expect(a.queue.waiting).toBe(1);
    expect(f.rows.get(d.id)).toMatchObject({ status: 'pending', payload: d.payload });
    expect(await inRedis(f, d.id)).toEqual({ state: { attempt: 0, next_attempt_at: t0 }, due: t0, lease: null });

    // The second gateway learns of it through Redis (the due set) and reads it from storage.
    expect(b.queue.waiting).toBe(0);
    expect(await b.queue.resume()).toBe(1);
    expect(b.queue.waiting).toBe(1);
    // Taken in once: a second scan finds it held already.
    expect(await b.queue.scan()).toBe(0);

    const [ta] = a.queue.due(t0, all);
    const [tb] = b.queue.due(t0, all);
    expect(ta?.id).toBe(d.id);
    expect(tb).toMatchObject({ id: d.id, payload: d.payload, endpoint_id: d.endpoint_id });
    const [ca, cb] = await Promise.all([a.queue.claim(ta as DeliveryRecord), b.queue.claim(tb as DeliveryRecord)]);
    const won = [ca, cb].filter((x) => x !== null);
    expect(won).toHaveLength(1);
    const [winner, loser] = ca ? [a, b] : [b, a];
    expect(won[0]).toMatchObject({ id: d.id, attempt: 0, payload: d.payload });
    expect((await inRedis(f, d.id)).lease).toBe(winner.co.owner);
    // The loser lets it go (it is the winner's until it settles); nothing waits anywhere.
    expect(loser.queue.waiting).toBe(0);
    expect(winner.queue.waiting).toBe(0);
    // Its stale copy is refused again while the lease holds.
    expect(await loser.queue.claim(d)).toBeNull();

    await winner.queue.settle(delivered(won[0] as DeliveryRecord));
    await winner.queue.flush();
    expect(f.rows.get(d.id)).toMatchObject({ status: 'delivered', attempt: 1 });
    const after = await inRedis(f, d.id);
    expect(after).toMatchObject({ state: { next_attempt_at: null }, due: null, lease: null });
    // Finished for the fleet: an old copy is never attempted again, and no scan finds it.
    expect(await loser.queue.claim(d)).toBeNull();
    expect(await loser.queue.scan()).toBe(0);
    expect(await winner.queue.scan()).toBe(0);
    expect(loser.queue.waiting + winner.queue.waiting).toBe(0);
    // Its finished state is kept a day (so no old copy revives it), not forever.
    const ttl = Number(await inspect.sendCommand(['PTTL', `${f.prefix}wh:d:${d.id}`]));
    expect(ttl).toBeGreaterThan(86_000_000);
    expect(ttl).toBeLessThanOrEqual(86_400_000);
  });

  it('a scan takes in only what falls due within 5 s of the clock', async () => {
    const { f, a, b } = await twoGateways();
    const t0 = f.clock.now();
    // The fleet's queue is filled already (a first start takes in all storage holds: tested below).
    expect(await a.queue.resume()).toBe(0);
    const d = delivery(f, { next_attempt_at: t0 + 10_000 });
    await a.queue.add([d]);
    expect(await b.queue.resume()).toBe(0);
    f.clock.set(t0 + 4_999);
    expect(await b.queue.scan()).toBe(0);
    f.clock.set(t0 + 5_000);
    expect(await b.queue.scan()).toBe(1);
    // Held, but not handed out before its time.
    expect(b.queue.due(t0 + 9_999, all)).toEqual([]);
    expect(b.queue.due(t0 + 10_000, all).map((x) => x.id)).toEqual([d.id]);
  });

  it('300 deliveries, three instances claiming at once: each attempt is leased to exactly one, retries included', async () => {
    const f = fleet();
    const gs = [await gateway(f), await gateway(f), await gateway(f)];
    const [a, b, c] = gs as [Gateway, Gateway, Gateway];
    const t0 = f.clock.now();
    const ds = Array.from({ length: 300 }, (_, i) => delivery(f, { endpoint_id: `we_${i % 7}` }));
    await a.queue.add(ds);
    expect(await b.queue.resume()).toBe(300);
    expect(await c.queue.resume()).toBe(300);
    expect([a, b, c].map((g) => g.queue.waiting)).toEqual([300, 300, 300]);

    // Round 1: 900 claims, interleaved over three connections.
    const first = await race(gs, t0);
    expect(first.size).toBe(300);
    for (const [id, ws] of first) expect(ws, id).toHaveLength(1);
    // Each lease is held in Redis by the instance whose claim won.
    const owners = await Promise.all(ds.map(async (d) => (await inRedis(f, d.id)).lease));
    const ownerOf = (id: string) => gs[first.get(id)?.[0]?.k ?? -1]?.co.owner;
    expect(owners).toEqual(ds.map((d) => ownerOf(d.id)));
    expect(gs.map((g) => g.queue.waiting)).toEqual([0, 0, 0]);

    // Every winner's attempt fails: retried 10 s later, by whichever instance wins then.
    const retryAt = t0 + 10_000;
    await Promise.all(
      [...first.values()].map((ws) => {
        const w = ws[0] as { k: number; d: DeliveryRecord };
        return (gs[w.k] as Gateway).queue.settle(failed(w.d, retryAt));
      }),
    );
    await Promise.all(gs.map((g) => g.queue.flush()));
    expect(gs.reduce((n, g) => n + g.queue.waiting, 0)).toBe(300);

    // A millisecond early: every instance takes the retries in, none hands one out.
    f.clock.set(retryAt - 1);
    await Promise.all(gs.map((g) => g.queue.scan()));
    expect(gs.map((g) => g.queue.waiting)).toEqual([300, 300, 300]);
    for (const g of gs) expect(g.queue.due(retryAt - 1, all)).toEqual([]);

    // Round 2, at its time: again one winner each, numbered as the fleet has it.
    f.clock.set(retryAt);
    const second = await race(gs, retryAt);
    expect(second.size).toBe(300);
    for (const [id, ws] of second) {
      expect(ws, id).toHaveLength(1);
      expect(ws[0]?.d.attempt, id).toBe(1);
    }
    await Promise.all(
      [...second.values()].map((ws) => {
        const w = ws[0] as { k: number; d: DeliveryRecord };
        return (gs[w.k] as Gateway).queue.settle(delivered(w.d));
      }),
    );
    await Promise.all(gs.map((g) => g.queue.flush()));

    // Done for the whole fleet: nothing due in Redis, nothing held, all delivered in two attempts.
    expect(await inspect.sendCommand(['ZCARD', `${f.prefix}wh:due`])).toBe(0);
    expect(await Promise.all(gs.map((g) => g.queue.scan()))).toEqual([0, 0, 0]);
    expect(gs.map((g) => g.queue.waiting)).toEqual([0, 0, 0]);
    for (const d of ds) expect(f.rows.get(d.id), d.id).toMatchObject({ status: 'delivered', attempt: 2 });
    // Each (delivery, attempt) outcome was written by one instance only.
    const outcomes = f.rows.written.filter((r) => r.status !== 'pending').map((r) => `${r.id}#${r.attempt}`);
    expect(outcomes).toHaveLength(600);
    expect(new Set(outcomes).size).toBe(600);
  });

  it('three dispatchers on the fleet queue make each attempt of each delivery once', async () => {
    const f = fleet();
    const cfg = webhooksConfig({ jitter: 0 });
    const eps = ['we_a', 'we_b', 'we_c'].map((id) => endpoint(id));
    const sent: { id: string; attempt: number; by: number; at: number }[] = [];
    const gs = [await gateway(f), await gateway(f), await gateway(f)];
    const ds = gs.map((g, k) => {
      const dispatcher = new Dispatcher({
        cfg,
        queue: g.queue,
        endpoints: endpointService(cfg, f.clock, eps).service,
        send: async (d, attempt, now) => {
          sent.push({ id: d.id, attempt, by: k, at: now });
          // Give the other instances' claims a turn while this attempt "runs".
          await new Promise((r) => setImmediate(r));
          return answer(attempt === 1 ? 503 : 204);
        },
        clock: f.clock,
        log: silentLogger,
        metrics: createMetrics({ process: false }),
      });
      cleanup.push(() => dispatcher.stop());
      return dispatcher;
    });
    const step = async () => {
      await Promise.all(gs.map((g) => g.queue.scan()));
      for (const d of ds) d.tick();
      await Promise.all(ds.map((d) => d.idle()));
    };
    const t0 = f.clock.now();
    const batch = Array.from({ length: 60 }, (_, i) => delivery(f, { endpoint_id: `we_${'abc'[i % 3]}` }));
    await gs[0]?.queue.add(batch);

    await step();
    await step();
    expect(sent).toHaveLength(60);
    expect(new Set(sent.map((s) => s.id)).size).toBe(60);
    expect(sent.every((s) => s.attempt === 1 && s.at === t0)).toBe(true);
    // First retry 5 s later (jitter 0): not a millisecond before.
    f.clock.set(t0 + 4_999);
    await step();
    expect(sent).toHaveLength(60);
    f.clock.set(t0 + 5_000);
    await step();
    await step();
    expect(sent).toHaveLength(120);
    const pairs = sent.map((s) => `${s.id}#${s.attempt}`);
    expect(new Set(pairs).size).toBe(120);
    for (const d of batch) expect(f.rows.get(d.id), d.id).toMatchObject({ status: 'delivered', attempt: 2 });
    f.clock.set(t0 + 86_400_000);
    await step();
    expect(sent).toHaveLength(120);
  });

  it('a retry is handed out at its time, not before, and a stale copy waits for the time and number the fleet has', async () => {
    const { f, a, b } = await twoGateways();
    const t0 = f.clock.now();
    const d = delivery(f);
    await a.queue.add([d]);
    expect(await b.queue.resume()).toBe(1);
    // A attempts it first; B still holds its copy (due now, attempt 0).
    const claimed = await a.queue.claim(a.queue.due(t0, all)[0] as DeliveryRecord);
    expect(claimed).not.toBeNull();
    const retryAt = t0 + 60_000;
    await a.queue.settle(failed(claimed as DeliveryRecord, retryAt));
    expect(await inRedis(f, d.id)).toEqual({
      state: { attempt: 1, next_attempt_at: retryAt },
      due: retryAt,
      lease: null,
    });
    expect(a.queue.due(retryAt - 1, all)).toEqual([]);

    f.clock.set(t0 + 1);
    const [stale] = b.queue.due(t0 + 1, all);
    expect(stale).toMatchObject({ id: d.id, attempt: 0, next_attempt_at: t0 });
    expect(await b.queue.claim(stale as DeliveryRecord)).toBeNull();
    // B now waits for the fleet's time, under the fleet's attempt number.
    expect(b.queue.waiting).toBe(1);
    expect(b.queue.due(retryAt - 1, all)).toEqual([]);
    expect((await inRedis(f, d.id)).lease).toBeNull();

    f.clock.set(retryAt);
    const [fromA] = a.queue.due(retryAt, all);
    const [fromB] = b.queue.due(retryAt, all);
    expect(fromB).toMatchObject({ id: d.id, attempt: 1, next_attempt_at: retryAt, payload: d.payload });
    expect(fromA).toMatchObject({ id: d.id, attempt: 1 });
    const got = await Promise.all([a.queue.claim(fromA as DeliveryRecord), b.queue.claim(fromB as DeliveryRecord)]);
    expect(got.filter((x) => x !== null)).toHaveLength(1);
    expect(got.find((x) => x !== null)).toMatchObject({ id: d.id, attempt: 1 });
  });

  it('an attempt number Redis holds is taken upwards only, up to the last allowed', async () => {
    const f = fleet();
    const a = await gateway(f);
    const d = delivery(f, { attempt: 3, status: 'failed', max_attempts: 8 });
    await a.queue.add([d]);
    const now = f.clock.now();
    // Someone resets it in Redis (or an old state lingers): never numbered back.
    await inspect.sendCommand(['SET', `${f.prefix}wh:d:${d.id}`, JSON.stringify({ attempt: 0, next_attempt_at: now })]);
    const got = await a.queue.claim(a.queue.due(now, all)[0] as DeliveryRecord);
    expect(got).toMatchObject({ id: d.id, attempt: 3 });
    await a.queue.settle(failed(got as DeliveryRecord, now + 1000));
    // Or pushed past the last attempt allowed: capped there (storage says how many are allowed).
    await inspect.sendCommand([
      'SET',
      `${f.prefix}wh:d:${d.id}`,
      JSON.stringify({ attempt: 99, next_attempt_at: now + 1000 }),
    ]);
    f.clock.set(now + 1000);
    const again = await a.queue.claim(a.queue.due(now + 1000, all)[0] as DeliveryRecord);
    expect(again).toMatchObject({ id: d.id, attempt: 7, max_attempts: 8 });
  });
});

describe('FleetQueue: an instance that dies or stalls mid-attempt', () => {
  it('its lease is taken over by another instance once it expires, under the same attempt number', async () => {
    const f = fleet();
    const leaseMs = 1500;
    const a = await gateway(f, { leaseMs });
    const b = await gateway(f);
    const d = delivery(f, { attempt: 2, status: 'failed' });
    const now = f.clock.now();
    await a.queue.add([d]);
    expect(await b.queue.resume()).toBe(1);
    const claimed = await a.queue.claim(a.queue.due(now, all)[0] as DeliveryRecord);
    const leasedAt = Date.now();
    expect(claimed).toMatchObject({ attempt: 2 });
    const pttl = Number(await inspect.sendCommand(['PTTL', `${f.prefix}wh:l:${d.id}`]));
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(leaseMs);
    // A dies mid-attempt: it never settles.
    a.queue.stop();
    await a.co.close();

    expect(await b.queue.claim(b.queue.due(now, all)[0] as DeliveryRecord)).toBeNull();
    expect(b.queue.waiting).toBe(0);

    // B keeps looking (as its timer would, every 2 s), and takes it once the lease expired.
    const got = await takeOver(f, b, 'the dead instance lease to expire');
    expect(Date.now() - leasedAt).toBeGreaterThanOrEqual(leaseMs - 200);
    // Made again under its number (attempt 3 is next): the cut-short attempt is not counted.
    expect(got).toMatchObject({ id: d.id, attempt: 2, payload: d.payload });
    expect((await inRedis(f, d.id)).lease).toBe(b.co.owner);
  });

  it('a late outcome after its lease expired neither ends the new holder lease nor the fleet state', async () => {
    const f = fleet();
    const warnings: string[] = [];
    const a = await gateway(f, { leaseMs: 800, log: createLogger('warn', (l) => warnings.push(l)) });
    const b = await gateway(f);
    const d = delivery(f);
    const now = f.clock.now();
    await a.queue.add([d]);
    const slow = await a.queue.claim(a.queue.due(now, all)[0] as DeliveryRecord);
    expect(slow).not.toBeNull();
    const got = await takeOver(f, b, 'the stalled instance lease to expire');
    const before = await inRedis(f, d.id);
    expect(before.lease).toBe(b.co.owner);

    // A's attempt finally ends (a failure to retry later): its lease is gone, so Redis keeps B's.
    const retryAt = now + 60_000;
    await a.queue.settle(failed(slow as DeliveryRecord, retryAt));
    expect(warnings.some((l) => l.includes('lease expired during its attempt') && l.includes(d.id))).toBe(true);
    expect(await inRedis(f, d.id)).toEqual(before);

    // B's attempt is delivered: finished for the fleet, so A's retry is never made.
    await b.queue.settle(delivered(got as unknown as DeliveryRecord));
    f.clock.set(retryAt);
    const [retry] = a.queue.due(retryAt, all);
    expect(retry?.id).toBe(d.id);
    expect(await a.queue.claim(retry as DeliveryRecord)).toBeNull();
    expect(a.queue.waiting).toBe(0);
  });
});

describe('FleetQueue: the rest of the interface', () => {
  it('end(): a delivery sent again by hand ends for the whole fleet, even while another instance attempts it', async () => {
    const { f, a, b } = await twoGateways();
    const now = f.clock.now();
    const d = delivery(f);
    const other = delivery(f, { endpoint_id: 'we_b' });
    await a.queue.add([d, other]);
    expect(await b.queue.resume()).toBe(2);
    const [taken] = b.queue.due(now, (x) => x.endpoint_id === d.endpoint_id) as [DeliveryRecord];
    expect(taken.id).toBe(d.id);
    const attempting = await b.queue.claim(taken);
    expect(attempting).not.toBeNull();

    const waitingCopy = a.queue.end(d);
    expect(waitingCopy).toMatchObject({ id: d.id, payload: d.payload });
    expect(a.queue.waiting).toBe(1);
    expect(a.queue.end(d)).toBeNull();
    await until(async () => (await inRedis(f, d.id)).state?.next_attempt_at === null, 'the end to reach Redis');
    expect((await inRedis(f, d.id)).due).toBeNull();

    // B's attempt fails: the retry it schedules is not made (the fleet ended it).
    const retryAt = now + 10_000;
    await b.queue.settle(failed(attempting as DeliveryRecord, retryAt));
    expect(await inRedis(f, d.id)).toMatchObject({ state: { next_attempt_at: null }, due: null, lease: null });
    f.clock.set(retryAt);
    const handed = b.queue.due(retryAt, all);
    expect(handed.map((x) => x.id).sort()).toEqual([d.id, other.id].sort());
    const claims = await Promise.all(handed.map(async (x) => [x.id, await b.queue.claim(x)] as const));
    expect(new Map(claims).get(d.id)).toBeNull();
    expect(new Map(claims).get(other.id)).toMatchObject({ id: other.id });
    // A newcomer finds only the other one.
    const c = await gateway(f);
    expect(await c.queue.resume()).toBe(1);
    expect(c.queue.due(retryAt, all).map((x) => x.id)).toEqual([other.id]);
  });

  it('waiting and overdueMs follow what is held and the clock', async () => {
    const f = fleet();
    const a = await gateway(f);
    const t0 = f.clock.now();
    expect(a.queue.waiting).toBe(0);
    expect(a.queue.overdueMs()).toBe(0);
    await a.queue.add([delivery(f), delivery(f, { next_attempt_at: t0 + 1000 })]);
    expect(a.queue.waiting).toBe(2);
    expect(a.queue.overdueMs()).toBe(0);
    f.clock.set(t0 + 3000);
    expect(a.queue.overdueMs()).toBe(3000);
    expect(a.queue.due(t0 + 999, all)).toHaveLength(1);
    expect(a.queue.waiting).toBe(1);
    expect(a.queue.overdueMs()).toBe(2000);
    // Taken for an attempt is not waiting.
    expect(a.queue.due(t0 + 3000, all)).toHaveLength(1);
    expect(a.queue.waiting).toBe(0);
    expect(a.queue.overdueMs()).toBe(0);
  });

  it('due() respects reserve, endpoint by endpoint', async () => {
    const f = fleet();
    const a = await gateway(f);
    const now = f.clock.now();
    await a.queue.add([
      delivery(f, { endpoint_id: 'we_a' }),
      delivery(f, { endpoint_id: 'we_a' }),
      delivery(f, { endpoint_id: 'we_b' }),
    ]);
    const asked: string[] = [];
    const onlyB = (x: DeliveryRecord) => {
      asked.push(x.endpoint_id);
      return x.endpoint_id === 'we_b';
    };
    expect(a.queue.due(now, onlyB).map((d) => d.endpoint_id)).toEqual(['we_b']);
    expect(asked).toContain('we_a');
    expect(a.queue.waiting).toBe(2);
    expect(a.queue.due(now, all).map((d) => d.endpoint_id)).toEqual(['we_a', 'we_a']);
  });

  it('withdraw() takes out what waits for a deleted endpoint; record() writes an outcome without an attempt', async () => {
    const f = fleet();
    const a = await gateway(f);
    const now = f.clock.now();
    const gone1 = delivery(f, { endpoint_id: 'we_gone' });
    const gone2 = delivery(f, { endpoint_id: 'we_gone' });
    const kept = delivery(f, { endpoint_id: 'we_kept' });
    await a.queue.add([gone1, gone2, kept]);
    const out = a.queue.withdraw('we_gone');
    expect(out.map((d) => d.id).sort()).toEqual([gone1.id, gone2.id].sort());
    expect(a.queue.waiting).toBe(1);
    expect(a.queue.withdraw('we_gone')).toEqual([]);
    for (const d of out) a.queue.record({ ...d, status: 'dead_lettered', next_attempt_at: null });
    await a.queue.flush();
    for (const d of out) {
      const row = f.rows.get(d.id);
      expect(row).toMatchObject({ status: 'dead_lettered', next_attempt_at: null });
      expect(row.updated_at).toBeGreaterThan(d.updated_at);
    }
    expect(a.queue.due(now, all).map((d) => d.id)).toEqual([kept.id]);
    // Storage says they are finished: no instance takes them in again from the due set.
    const b = await gateway(f);
    expect(await b.queue.resume()).toBe(1);
  });

  it('first start: an empty queue in Redis is filled from storage once, retries keeping their numbers', async () => {
    const f = fleet();
    const t0 = f.clock.now();
    const now1 = delivery(f);
    const later = delivery(f, { attempt: 2, status: 'failed', next_attempt_at: t0 + 3_600_000 });
    const done = delivery(f, { attempt: 1, status: 'delivered', next_attempt_at: null });
    await f.rows.put([now1, later, done]);
    const a = await gateway(f);
    const b = await gateway(f);
    // The first scan of the fleet fills Redis from storage and takes in every unfinished one.
    expect(await a.queue.resume()).toBe(2);
    expect(await inspect.sendCommand(['EXISTS', `${f.prefix}wh:seeded`])).toBe(1);
    expect(await inRedis(f, later.id)).toEqual({
      state: { attempt: 2, next_attempt_at: t0 + 3_600_000 },
      due: t0 + 3_600_000,
      lease: null,
    });
    expect((await inRedis(f, done.id)).state).toBeNull();
    // The next instance finds the queue filled: it takes in what is due soon, from Redis.
    expect(await b.queue.resume()).toBe(1);
    expect(b.queue.due(t0, all).map((d) => d.id)).toEqual([now1.id]);
    f.clock.set(t0 + 3_600_000);
    const r = a.queue.due(t0 + 3_600_000, all).find((x) => x.id === later.id);
    expect(await a.queue.claim(r as DeliveryRecord)).toMatchObject({ id: later.id, attempt: 2 });
  });

  it('an instance restarted resumes from Redis what is due soon, and the rest at its time', async () => {
    const f = fleet();
    const a = await gateway(f);
    const t0 = f.clock.now();
    const soon = delivery(f);
    const inAnHour = delivery(f, { next_attempt_at: t0 + 3_600_000 });
    await a.queue.add([soon, inAnHour]);
    expect(await a.queue.resume()).toBe(0);
    a.queue.stop();
    await a.co.close();
    // Stopped: it looks no more.
    expect(await a.queue.scan()).toBe(0);

    const a2 = await gateway(f);
    expect(await a2.queue.resume()).toBe(1);
    expect(a2.queue.due(t0, all).map((d) => d.id)).toEqual([soon.id]);
    f.clock.set(t0 + 3_600_000 - 5_001);
    expect(await a2.queue.scan()).toBe(0);
    f.clock.set(t0 + 3_600_000 - 5_000);
    expect(await a2.queue.scan()).toBe(1);
    expect(a2.queue.due(t0 + 3_600_000, all).map((d) => d.id)).toEqual([inAnHour.id]);
  });

  it('start() looks every 2 s by itself and tells found; stop() stops looking and keeps what waits', async () => {
    const { f, a, b } = await twoGateways();
    let found = 0;
    b.queue.start(() => found++);
    await b.queue.resume();
    const d = delivery(f);
    await a.queue.add([d]);
    await until(() => found > 0, 'the scan timer to find the delivery', 8000);
    expect(b.queue.waiting).toBe(1);
    b.queue.stop();
    await a.queue.add([delivery(f)]);
    await pause(2500);
    expect(found).toBe(1);
    expect(b.queue.waiting).toBe(1);
    expect(await b.queue.scan()).toBe(0);
  });
});

/** A TCP relay to Redis on loopback that the test can cut (every connection dropped, new ones refused) and restore. */
async function relay(port: number) {
  let down = false;
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    if (down) {
      client.destroy();
      return;
    }
    const upstream = connect(port, '127.0.0.1');
    open.add(client);
    open.add(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    for (const s of [client, upstream]) {
      s.on('error', drop);
      s.on('close', drop);
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  const url = `redis://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/0`;
  cleanup.push(
    () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  );
  return {
    url,
    cut: () => {
      down = true;
      for (const s of open) s.destroy();
    },
    restore: () => {
      down = false;
    },
  };
}

describe('FleetQueue: a backlog of its own', () => {
  it("does not hide another instance's delivery from its scan (the fleet's due set is read past what it holds)", async () => {
    const { f, a, b } = await twoGateways();
    expect(await a.queue.resume()).toBe(0);
    const t0 = f.clock.now();
    // 1,200 of A's own, overdue and waiting (its endpoint at its cap), ahead in the due set.
    await a.queue.add(
      Array.from({ length: 1200 }, () => delivery(f, { endpoint_id: 'we_busy', next_attempt_at: t0 - 1000 })),
    );
    // B makes one, then goes away before attempting it.
    const d = delivery(f, { endpoint_id: 'we_other' });
    await b.queue.add([d]);
    await b.co.close();
    expect(await a.queue.scan()).toBe(1);
    expect(a.queue.due(t0, (x) => x.endpoint_id === 'we_other').map((x) => x.id)).toEqual([d.id]);
    expect(await a.queue.claim(d)).toMatchObject({ id: d.id, attempt: 0 });
  });
});

describe('FleetQueue: deliveries withdrawn for a deleted endpoint', () => {
  const f = fleet();
  let live: DeliveryRecord;
  let withdrawn: DeliveryRecord[] = [];
  let handedToB: string[] = [];
  let dueLeft = 0;
  let cancelCalls = 0;

  beforeAll(async () => {
    const a = await gateway(f);
    const b = await gateway(f);
    // The fleet's queue was filled at its first start.
    expect(await a.queue.resume()).toBe(0);
    const t0 = f.clock.now();
    // A backlog of 1000 for an endpoint (overdue), and one for another endpoint.
    await a.queue.add(
      Array.from({ length: 1000 }, () => delivery(f, { endpoint_id: 'we_gone', next_attempt_at: t0 - 1000 })),
    );
    live = delivery(f, { endpoint_id: 'we_live' });
    await a.queue.add([live]);
    // The endpoint is deleted on A (as DELETE /v2/webhooks/endpoints/{id} does: Dispatcher.cancel).
    const calls = await a.leaseCalls();
    withdrawn = a.queue.withdraw('we_gone');
    expect(withdrawn).toHaveLength(1000);
    for (const d of withdrawn) a.queue.record({ ...d, status: 'dead_lettered', next_attempt_at: null });
    await a.queue.flush();
    expect(f.rows.get(withdrawn[0]?.id as string)).toMatchObject({ status: 'dead_lettered' });
    // The withdrawal reaches Redis in the background (a cancel per delivery): given 5 s.
    const zcard = async () => Number(await inspect.sendCommand(['ZCARD', `${f.prefix}wh:due`]));
    await until(async () => (await zcard()) <= 1, 'the withdrawn deliveries to leave the due set').catch(() => {});
    cancelCalls = (await a.leaseCalls()) - calls;
    // B, another instance, looks for what it could take over (as it would when A dies):
    // for 2 s at most, as its timer would every 2 s.
    const end = Date.now() + 2000;
    await b.queue.resume();
    while (b.queue.waiting === 0 && Date.now() < end) {
      await pause(100);
      await b.queue.scan();
    }
    handedToB = b.queue.due(f.clock.now(), all).map((x) => x.id);
    dueLeft = await zcard();
  });

  // Withdrawn deliveries are ended in Redis too: storage has them dead-lettered, so
  // Redis listing them as due for good would fill every scan (the most overdue 1000
  // first) and hide every later delivery from the fleet (found by this test).
  it('do not hide the deliveries due after them from the fleet scans', () => {
    expect(handedToB).toEqual([live.id]);
  });

  it('do not stay in the fleet due set', () => {
    expect(dueLeft).toBe(1);
  });

  it('leave in a few calls to Redis, not one each (500 a call)', () => {
    expect(cancelCalls).toBe(2);
  });
});

describe('FleetQueue: Redis unavailable', () => {
  it('at a claim: no attempt, tried again 1 s later by the clock; leased once Redis is back', async () => {
    const f = fleet();
    const r = await relay(redis.port);
    const a = await gateway(f, { url: r.url });
    const b = await gateway(f);
    const t0 = f.clock.now();
    const d = delivery(f);
    await a.queue.add([d]);
    r.cut();
    await until(() => !a.co.ready, 'the cut to be noticed');

    const [taken] = a.queue.due(t0, all);
    expect(await a.queue.claim(taken as DeliveryRecord)).toBeNull();
    expect(await inRedis(f, d.id)).toMatchObject({ lease: null, due: t0 });
    // It waits here again, for a second on the clock.
    expect(a.queue.waiting).toBe(1);
    expect(a.queue.due(t0 + 999, all)).toEqual([]);
    const [again] = a.queue.due(t0 + 1000, all);
    expect(again).toMatchObject({ id: d.id, attempt: 0, next_attempt_at: t0 + 1000 });
    // A scan fails quietly.
    expect(await a.queue.scan()).toBe(0);

    r.restore();
    await until(() => a.co.ready, 'the connection to come back', 8000);
    f.clock.set(t0 + 1000);
    expect(await a.queue.claim(again as DeliveryRecord)).toMatchObject({ id: d.id, attempt: 0 });
    expect((await inRedis(f, d.id)).lease).toBe(a.co.owner);
    // Still one at a time: the other instance is refused.
    expect(await b.queue.claim(d)).toBeNull();
  });

  it('at settle: the outcome is written to storage, and the lease ended at the first scan once Redis is back', async () => {
    const f = fleet();
    const r = await relay(redis.port);
    const a = await gateway(f, { url: r.url });
    const b = await gateway(f);
    const t0 = f.clock.now();
    const d = delivery(f);
    await a.queue.add([d]);
    const claimed = await a.queue.claim(a.queue.due(t0, all)[0] as DeliveryRecord);
    expect(claimed).not.toBeNull();
    r.cut();
    await until(() => !a.co.ready, 'the cut to be noticed');

    await a.queue.settle(delivered(claimed as DeliveryRecord));
    await a.queue.flush();
    expect(f.rows.get(d.id)).toMatchObject({ status: 'delivered', attempt: 1 });
    expect(a.queue.waiting).toBe(0);
    // Redis has not heard: the lease is A's still, so no one else attempts it meanwhile.
    expect(await inRedis(f, d.id)).toEqual({ state: { attempt: 0, next_attempt_at: t0 }, due: t0, lease: a.co.owner });
    expect(await b.queue.claim(d)).toBeNull();

    r.restore();
    await until(() => a.co.ready, 'the connection to come back', 8000);
    expect(await a.queue.scan()).toBe(0);
    expect(await inRedis(f, d.id)).toEqual({ state: { attempt: 1, next_attempt_at: null }, due: null, lease: null });
    expect(await b.queue.claim(d)).toBeNull();
    expect(await b.queue.scan()).toBe(0);
    expect(b.queue.waiting).toBe(0);
  });

  describe('at add', () => {
    const f = fleet();
    let a: Gateway;
    let b: Gateway;
    let d: DeliveryRecord;
    let rejected: unknown;
    let handed: string[] = [];

    beforeAll(async () => {
      const r = await relay(redis.port);
      a = await gateway(f, { url: r.url });
      b = await gateway(f);
      // The fleet's queue is filled already (not a first start).
      expect(await a.queue.resume()).toBe(0);
      r.cut();
      await until(() => !a.co.ready, 'the cut to be noticed');
      d = delivery(f);
      rejected = await a.queue.add([d]).then(
        () => null,
        (e: unknown) => e,
      );
      r.restore();
      await until(() => a.co.ready, 'the connection to come back', 8000);
      await a.queue.scan();
      await b.queue.scan();
      const t = f.clock.now();
      handed = [...a.queue.due(t, all), ...b.queue.due(t, all)].map((x) => x.id);
    });

    it('resolves once storage holds the delivery, though Redis did not hear of it', () => {
      expect(rejected).toBeNull();
      expect(f.rows.get(d.id)).toMatchObject({ status: 'pending', next_attempt_at: d.next_attempt_at });
    });

    // Stored, then held by the instance that made it (a claim puts it in the fleet's
    // queue), and told to Redis at its first scan once Redis is back, so the fleet lists
    // it even if that instance goes away (found by this test: it was in no memory and
    // not in Redis, and Redis was seeded already, so nothing ever attempted it).
    it('the delivery stored while Redis was unreachable is taken in by the fleet once it is back', async () => {
      expect(handed).toContain(d.id);
      // Listed in the fleet's queue at its time, so another instance would take it over.
      expect(await inRedis(f, d.id)).toMatchObject({ due: d.next_attempt_at, lease: null });
    });
  });

  it('Redis restarted empty: the queue is filled again from storage and from what each instance holds', async () => {
    const r2 = await startRedis();
    cleanup.push(() => r2.stop());
    const f = fleet();
    const a = await gateway(f, { url: r2.url });
    const b = await gateway(f, { url: r2.url });
    const c = await gateway(f, { url: r2.url });
    const t0 = f.clock.now();
    const retryAt = t0 + 60_000;
    // A attempted d1 once (failed; retried in a minute). C made d2 and died before attempting it.
    const d1 = delivery(f);
    await a.queue.add([d1]);
    const claimed = await a.queue.claim(a.queue.due(t0, all)[0] as DeliveryRecord);
    await a.queue.settle(failed(claimed as DeliveryRecord, retryAt));
    await a.queue.flush();
    const d2 = delivery(f, { next_attempt_at: retryAt });
    await c.queue.add([d2]);
    c.queue.stop();
    await c.co.close();

    await r2.stop();
    await until(() => !a.co.ready && !b.co.ready, 'the restart to be noticed');
    await r2.start();
    await until(() => a.co.ready && b.co.ready, 'the connections to come back', 8000);
    expect(await r2.cli('DBSIZE')).toBe('0');

    f.clock.set(retryAt);
    // What A holds: its retry is leased under its own number, Redis having lost it.
    const [mine] = a.queue.due(retryAt, all);
    expect(await a.queue.claim(mine as DeliveryRecord)).toMatchObject({ id: d1.id, attempt: 1 });
    // What storage holds: B's scan fills the queue again, the dead instance's delivery too.
    expect(await b.queue.scan()).toBe(2);
    expect(await r2.cli('EXISTS', `${f.prefix}wh:seeded`)).toBe('1');
    expect(await r2.cli('ZCARD', `${f.prefix}wh:due`)).toBe('2');
    const handed = b.queue.due(retryAt, all);
    const got = new Map(await Promise.all(handed.map(async (x) => [x.id, await b.queue.claim(x)] as const)));
    // A holds d1's lease: B is refused it; d2 is B's, as the dead instance made it.
    expect(got.get(d1.id)).toBeNull();
    expect(got.get(d2.id)).toMatchObject({ id: d2.id, attempt: 0, payload: d2.payload });
  });
});
