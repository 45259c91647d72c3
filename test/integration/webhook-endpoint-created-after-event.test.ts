// Regression tests from a review of webhook fan-out (2026-11-28).
// An endpoint is told only of events raised since it was created (as Svix's are): an
// event older than the endpoint, read late by the fan-out (a loaded host, a poll behind,
// an event recorded late), goes to the endpoints that existed when it was raised, never
// to a newer one. Through the real gateway, its fan-out and receivers on loopback.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { EventRecord } from '../../src/events/event.js';
import { newEventId, newSecret } from '../../src/ids.js';
import { EventTable } from '../../src/store/events.js';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const T0 = Date.UTC(2026, 10, 28, 9, 0, 0);
const WEBHOOKS = { allow_insecure_http: true, allow_private_networks: true, jitter: 0, timeout_ms: 300 };

/** A key.revoked event raised at `at`, as the bus records it. */
function revoked(at: number, keyId: string): EventRecord {
  return {
    id: newEventId(at),
    type: 'key.revoked',
    environment: 'production',
    created_at: at,
    data: JSON.stringify({ key: { id: keyId }, scheduled: false }),
  };
}

/** The ids of the events a receiver was sent. */
const eventIds = (rx: Receiver): string[] => rx.got.map((g) => (JSON.parse(g.body) as { id: string }).id);

describe('fan-out: an endpoint created after an event (one gateway, embedded store)', () => {
  const clock = new ManualClock(T0);
  let t: TestGateway;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    t = await startGateway({ webhooks: WEBHOOKS }, { clock });
  });
  afterAll(async () => {
    await t?.cleanup();
    await Promise.all(receivers.map((r) => r.close()));
  });

  const receiver = async () => {
    const r = await startReceiver(clock);
    receivers.push(r);
    return r;
  };
  const register = async (rx: Receiver): Promise<string> => {
    const r = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', { url: rx.url, events: ['key.revoked'] });
    expect(r.status).toBe(201);
    return r.body.id as string;
  };
  const deliveredTo = async (endpointId: string): Promise<string[]> => {
    const r = await call(t.url, t.admin, 'GET', `/v2/webhooks/deliveries?endpoint_id=${endpointId}&limit=100`);
    expect(r.status).toBe(200);
    return (r.body.data as { event_id: string }[]).map((d) => d.event_id).sort();
  };
  /** The fan-out reads what is recorded, and every attempt it started is made. */
  const fannedOut = async () => {
    await t.gw.events.flush();
    await t.gw.fanout?.poll();
    await t.gw.dispatcher.idle();
  };

  it('an event recorded before the endpoint was created, read by the fan-out after: only the endpoint that existed gets it; a later event reaches both', async () => {
    const before = await receiver();
    const after = await receiver();
    const existing = await register(before);
    clock.advance(1_000);
    // Recorded in the events table as the bus records it. On the embedded store the fan-out
    // reads when the bus records a batch, so this row waits for the poll below: a fan-out
    // that reads late, as on a loaded host.
    const older = revoked(clock.now(), 'key_older');
    await new EventTable(t.gw.store).insert([older]);
    clock.advance(1_000);
    const created = await register(after);
    await fannedOut();
    expect(eventIds(before)).toEqual([older.id]);
    expect(eventIds(after), 'the new endpoint was sent an event raised before it was created').toEqual([]);
    expect(await deliveredTo(created)).toEqual([]);
    expect(await deliveredTo(existing)).toEqual([older.id]);

    // An event raised after the endpoint was created (a key revoked through the API) reaches both.
    clock.advance(1_000);
    const k = await t.gw.keys.create(
      { label: 'later', environment: 'production', scopes: ['webhooks:read'] },
      'production',
    );
    expect((await call(t.url, t.admin, 'DELETE', `/v2/api-keys/${k.key.id}`)).status).toBe(200);
    await fannedOut();
    await until(() => before.got.length >= 2 && after.got.length >= 1, 5_000, 'the later event at both');
    const later = eventIds(after)[0] as string;
    expect(JSON.parse(after.got[0]?.body ?? '{}')).toMatchObject({
      type: 'key.revoked',
      data: { key: { id: k.key.id } },
    });
    expect(eventIds(before)).toEqual([older.id, later]);
    expect(eventIds(after)).toEqual([later]);
    expect(await deliveredTo(created)).toEqual([later]);
  });

  it('an event raised in the same millisecond as the endpoint was created reaches it', async () => {
    const rx = await receiver();
    await register(rx);
    const same = revoked(clock.now(), 'key_same');
    await new EventTable(t.gw.store).insert([same]);
    await fannedOut();
    expect(eventIds(rx)).toEqual([same.id]);
  });

  it('an event raised a millisecond before the endpoint was created does not', async () => {
    const rx = await receiver();
    const earlier = revoked(clock.now(), 'key_earlier');
    clock.advance(1);
    const created = await register(rx);
    await new EventTable(t.gw.store).insert([earlier]);
    await fannedOut();
    expect(eventIds(rx)).toEqual([]);
    expect(await deliveredTo(created)).toEqual([]);
  });

  it('an endpoint created while the clock ran ahead, the clock then put back: it gets the events that follow, not nothing until the clock passes its stamp', async () => {
    const rx = await receiver();
    clock.advance(3_600_000);
    const created = await register(rx);
    // NTP puts the clock back by the hour it was ahead.
    clock.set(clock.now() - 3_600_000);
    const next = revoked(clock.now(), 'key_after_step');
    await new EventTable(t.gw.store).insert([next]);
    await fannedOut();
    expect(eventIds(rx)).toEqual([next.id]);
    expect(await deliveredTo(created)).toEqual([next.id]);
  });
});

describe('fan-out: an endpoint created after an event (a fleet of two on Redis)', () => {
  const admin = `svc_live_${newSecret()}`;
  const clock = new ManualClock(T0);
  let redis: TestRedis;
  let storage: HttpStorage;
  let before: Receiver;
  let after: Receiver;
  const gws: TestGateway[] = [];

  beforeAll(async () => {
    [redis, storage] = await Promise.all([startRedis(), startHttpStorage()]);
    [before, after] = await Promise.all([startReceiver(clock), startReceiver(clock)]);
    const values = {
      storage: {
        clickhouse_url: storage.url,
        encryption_key: randomBytes(32).toString('base64'),
        key_poll_interval_ms: 200,
      },
      coordination: { redis_url: redis.url, timeout_ms: 500 },
      webhooks: WEBHOOKS,
    };
    gws.push(await startGateway(values, { admin, clock }));
    gws.push(await startGateway(values, { admin, clock }));
  }, 120_000);
  afterAll(async () => {
    for (const g of gws) await g.cleanup();
    await Promise.all([redis?.stop(), storage?.stop(), before?.close(), after?.close()]);
  }, 60_000);

  it('whichever instance leads the fan-out, the endpoint created after an event (on the other instance) is not sent it; a later event reaches both', async () => {
    const [g1, g2] = gws as [TestGateway, TestGateway];
    const register = async (g: TestGateway, rx: Receiver): Promise<string> => {
      const r = await call(g.url, admin, 'POST', '/v2/webhooks/endpoints', { url: rx.url, events: ['key.revoked'] });
      expect(r.status).toBe(201);
      const id = r.body.id as string;
      // Both instances know it (announced through Redis) before any event below is recorded.
      await until(() => gws.every((x) => x.gw.endpoints.get(id) !== undefined), 10_000, `${id} on both instances`);
      return id;
    };
    const existing = await register(g1, before);
    clock.advance(1_000);
    // Raised now; recorded only after the next endpoint exists (as a batch spooled while
    // storage was away is): a fleet's fan-out polls every 250 ms, so this is how it reads
    // an event older than an endpoint it knows.
    const older = revoked(clock.now(), 'key_older');
    clock.advance(1_000);
    const created = await register(g2, after);
    await new EventTable(g1.gw.store).insert([older]);
    // A later event, raised through the API on the other instance.
    clock.advance(1_000);
    const k = await g2.gw.keys.create(
      { label: 'later', environment: 'production', scopes: ['webhooks:read'] },
      'production',
    );
    const revokedNow = await fetch(`${g2.url}/v2/api-keys/${k.key.id}`, { method: 'DELETE', headers: bearer(admin) });
    expect(revokedNow.status).toBe(200);
    await revokedNow.arrayBuffer();
    await g2.gw.events.flush();

    await until(() => before.got.length >= 2 && after.got.length >= 1, 15_000, 'deliveries');
    const deliveredTo = async (endpointId: string) =>
      (
        (await call(g1.url, admin, 'GET', `/v2/webhooks/deliveries?endpoint_id=${endpointId}&limit=100`)).body.data as {
          event_id: string;
        }[]
      )
        .map((d) => d.event_id)
        .sort();
    const later = (await deliveredTo(existing)).find((id) => id !== older.id) as string;
    expect(later).toMatch(/^evt_/);
    expect(await deliveredTo(existing)).toEqual([older.id, later].sort());
    // The older event's deliveries were all written before its first was attempted.
    expect(await deliveredTo(created), 'the new endpoint was given an event raised before it was created').toEqual([
      later,
    ]);
    expect(eventIds(after)).toEqual([later]);
    expect(eventIds(before).sort()).toEqual([older.id, later].sort());
  }, 60_000);
});
