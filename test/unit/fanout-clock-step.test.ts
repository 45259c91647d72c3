// Regression tests from a review of time handling (2026-11-27).
import { describe, expect, it } from 'vitest';
import type { EventRecord } from '../../src/events/event.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import { FanOut } from '../../src/webhooks/fanout.js';
import { answer, dispatcherHarness, endpoint, webhooksConfig } from '../helpers/webhook-fakes.js';

/*
 * Review (time): the fan-out reads the events table by `recorded_at`, which the store
 * stamps with its own clock (`now64(3)`: the host's wall clock with the embedded
 * engine). Here one ManualClock is the host's clock, read both by the gateway and by
 * the in-memory events table when it stamps recorded_at, as chDB does.
 */
type Recorded = EventRecord & { recorded_at: number };

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

function harness(o: { saved?: number } = {}) {
  const cfg = webhooksConfig();
  const h = dispatcherHarness({ cfg, endpoints: [endpoint('ep_a')], respond: () => answer(200) });
  const events: Recorded[] = [];
  let cursor: number | null = o.saved ?? null;
  /** A fan-out over this table, these deliveries and this cursor (a process started again: a new one). */
  const start = () =>
    new FanOut({
      cfg,
      events: {
        // The store's clock is the host's.
        serverNow: async () => h.clock.now(),
        // As recordedAfterSql: (recorded_at, id) > (t, id), in that order.
        recordedAfter: async (t, id) =>
          events
            .filter((e) => e.recorded_at > t || (e.recorded_at === t && e.id > id))
            .sort((a, b) => a.recorded_at - b.recorded_at || (a.id < b.id ? -1 : 1))
            .slice(0, 2000),
      },
      // As the deliveries table answers: the pairs among these events that have a delivery.
      deliveries: {
        existingPairs: async (ids) =>
          new Set(h.rows.written.filter((d) => ids.includes(d.event_id)).map((d) => `${d.event_id}|${d.endpoint_id}`)),
      },
      endpoints: h.endpoints,
      dispatcher: h.dispatcher,
      clock: h.clock,
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
  let n = 0;
  /** An event raised and recorded now (the bus inserts it; the store stamps recorded_at). */
  const record = (type: string): Recorded => {
    const now = h.clock.now();
    const e = {
      id: `evt_${String(++n).padStart(4, '0')}`,
      type,
      environment: 'production',
      created_at: now,
      data: JSON.stringify({ n }),
      recorded_at: now,
    };
    events.push(e);
    return e;
  };
  /** How many deliveries each event got. */
  const made = () => {
    const by = new Map<string, Set<string>>();
    for (const d of h.rows.written) by.set(d.event_id, (by.get(d.event_id) ?? new Set()).add(d.id));
    return new Map([...by].map(([e, ids]) => [e, ids.size]));
  };
  return { ...h, fanout: start(), start, record, events, made, cursor: () => cursor };
}

describe('review-time: webhook fan-out when the host clock steps back', () => {
  it('an event recorded after an NTP step back of 60 s is delivered (not skipped by the recorded_at cursor)', async () => {
    const f = harness();
    f.clock.set(T0);
    await f.fanout.init();
    const e1 = f.record('key.revoked');
    await f.fanout.poll();
    await f.dispatcher.idle();
    expect(f.sent).toHaveLength(1);

    // The host clock ran 60 s fast; NTP steps it back. A key is revoked right after.
    f.clock.set(e1.recorded_at - 60_000);
    const e2 = f.record('key.revoked');
    await f.fanout.poll();
    await f.dispatcher.idle();

    // Time goes on past where it was before the step, more events come: still not e2.
    f.clock.set(e1.recorded_at + 120_000);
    const e3 = f.record('key.revoked');
    await f.fanout.poll();
    await f.dispatcher.idle();

    const delivered = f.rows.written.map((d) => d.event_id);
    expect(delivered).toContain(e3.id);
    expect(delivered, 'the key.revoked raised after the step back never gets a delivery').toContain(e2.id);
  });

  it('events fanned out before the step back, read again after it, are not delivered twice', async () => {
    const f = harness();
    f.clock.set(T0);
    await f.fanout.init();
    // 40 s of events, each fanned out as it is recorded: the first ones leave its memory.
    const before: Recorded[] = [];
    for (let i = 0; i < 20; i++) {
      before.push(f.record('key.revoked'));
      await f.fanout.poll();
      f.clock.advance(2_000);
    }
    // Stepped back 30 s: reading goes back over rows stamped as those were.
    f.clock.advance(-30_000);
    const after = f.record('key.revoked');
    await f.fanout.poll();
    f.clock.advance(5_000);
    await f.fanout.poll();
    // And on, past where it was before the step.
    f.clock.advance(60_000);
    const later = f.record('key.revoked');
    await f.fanout.poll();
    await f.dispatcher.idle();

    const made = f.made();
    for (const e of [...before, after, later]) expect(made.get(e.id), e.id).toBe(1);
    expect(f.sent).toHaveLength(22);
  });

  it('started again with a saved cursor ahead of the store clock (put back while it was down): delivers what comes, nothing twice', async () => {
    const f = harness();
    f.clock.set(T0);
    await f.fanout.init();
    const before: Recorded[] = [];
    for (let i = 0; i < 10; i++) {
      before.push(f.record('key.revoked'));
      await f.fanout.poll();
      f.clock.advance(5_000);
    }
    await f.fanout.stop();
    expect(f.cursor()).toBe(T0 + 45_000);

    // Down; the host clock is put back a minute; started again, a key is revoked at once.
    f.clock.set(T0 + 45_000 - 60_000);
    const next = f.start();
    await next.init();
    const after = f.record('key.revoked');
    await next.poll();
    await f.dispatcher.idle();

    const made = f.made();
    for (const e of before) expect(made.get(e.id), e.id).toBe(1);
    expect(made.get(after.id), 'the event raised after the restart').toBe(1);
  });
});
