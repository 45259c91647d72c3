import { describe, expect, it, vi } from 'vitest';
import type { EventRecord } from '../../src/events/event.js';
import { envelope } from '../../src/events/event.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import { FanOut, SOLO_POLL_MS, trafficBound } from '../../src/webhooks/fanout.js';
import type { DeliveryRecord, EndpointRecord } from '../../src/webhooks/records.js';
import { answer, dispatcherHarness, endpoint, webhooksConfig } from '../helpers/webhook-fakes.js';

/*
 * The fan-out over an in-memory events table and cursor, into a real dispatcher
 * on a LocalQueue (fake sender, manual clock).
 */

type Recorded = EventRecord & { recorded_at: number };

function fanoutHarness(
  o: { endpoints?: EndpointRecord[]; maxQueued?: number; existing?: Set<string>; leading?: () => boolean } = {},
) {
  const cfg = webhooksConfig(o.maxQueued === undefined ? {} : { max_queued_events: o.maxQueued });
  const h = dispatcherHarness({ cfg, endpoints: o.endpoints ?? [endpoint('ep_a')], respond: () => answer(200) });
  const events: Recorded[] = [];
  let cursor: number | null = null;
  const checked: string[][] = [];
  const made: DeliveryRecord[] = [];
  let failAdds = 0;
  const metrics = createMetrics({ process: false });
  let reads = 0;
  const fanout = new FanOut({
    cfg,
    events: {
      serverNow: async () => h.clock.now(),
      recordedAfter: async (t, id) => {
        reads++;
        return events
          .filter((e) => e.recorded_at > t || (e.recorded_at === t && e.id > id))
          .sort((a, b) => a.recorded_at - b.recorded_at || (a.id < b.id ? -1 : 1))
          .slice(0, 2000);
      },
    },
    deliveries: {
      existingPairs: async (ids) => {
        checked.push([...ids]);
        return o.existing ?? new Set();
      },
    },
    endpoints: h.endpoints,
    dispatcher: {
      get queued() {
        return h.dispatcher.queued;
      },
      add: async (rows) => {
        if (failAdds > 0) {
          failAdds--;
          throw new Error('storage unavailable');
        }
        const taken = await h.dispatcher.add(rows);
        made.push(...rows.slice(0, taken));
        return taken;
      },
    },
    clock: h.clock,
    log: silentLogger,
    metrics,
    cursors: {
      get: async () => cursor,
      set: async (_i, t) => {
        cursor = t;
      },
    },
    leader: o.leading
      ? { lead: async () => ({ leading: o.leading?.() ?? false, gained: false }), resign: async () => {} }
      : null,
  });
  let n = 0;
  /** An event recorded now. */
  const record = (type: string, environment = 'production', data: Record<string, unknown> = {}): Recorded => {
    const e = {
      id: `evt_${String(++n).padStart(4, '0')}`,
      type,
      environment,
      created_at: h.clock.now(),
      data: JSON.stringify(data),
      recorded_at: h.clock.now(),
    };
    events.push(e);
    return e;
  };
  return {
    ...h,
    fanout,
    record,
    /** The events table's rows, to add one as it is (a row raised again). */
    events,
    made,
    checked,
    metrics,
    cursor: () => cursor,
    /** Reads of the events table so far. */
    reads: () => reads,
    failNextAdd: () => {
      failAdds++;
    },
  };
}

describe('the fan-out', () => {
  it("makes one delivery per enabled endpoint of the event's environment subscribed to its type (or to *)", async () => {
    const f = fanoutHarness({
      endpoints: [
        endpoint('ep_all'),
        endpoint('ep_errors', { events: ['wake.error'] }),
        endpoint('ep_keys', { events: ['key.revoked'] }),
        endpoint('ep_sandbox', { environment: 'sandbox' }),
        endpoint('ep_off', { status: 'disabled' }),
      ],
    });
    await f.fanout.init();
    const e = f.record('wake.error', 'production', { wake: { id: 'wk_1' } });
    await f.fanout.poll();
    expect(f.made.map((d) => d.endpoint_id).sort()).toEqual(['ep_all', 'ep_errors']);
    for (const d of f.made)
      expect(d).toMatchObject({
        event_id: e.id,
        event_type: 'wake.error',
        payload: envelope(e),
        attempt: 0,
        max_attempts: 8,
      });
    await f.dispatcher.idle();
    expect(f.sent.map((s) => [s.endpoint, s.attempt]).sort()).toEqual([
      ['ep_all', 1],
      ['ep_errors', 1],
    ]);
    // The cursor is saved once the deliveries are written.
    expect(f.cursor()).toBe(e.recorded_at);
  });

  it('never sends webhook.disabled to the endpoint it is about', async () => {
    const f = fanoutHarness({ endpoints: [endpoint('ep_a'), endpoint('ep_b')] });
    await f.fanout.init();
    f.record('webhook.disabled', 'production', { endpoint: { id: 'ep_a' } });
    await f.fanout.poll();
    expect(f.made.map((d) => d.endpoint_id)).toEqual(['ep_b']);
  });

  it('reads again what overlaps the last poll, and still makes each delivery once', async () => {
    const f = fanoutHarness();
    await f.fanout.init();
    f.record('wake.error');
    await f.fanout.poll();
    f.clock.advance(1000);
    f.record('wake.slow');
    await f.fanout.poll();
    await f.fanout.poll();
    expect(f.made.map((d) => d.event_type)).toEqual(['wake.error', 'wake.slow']);
  });

  it('checks events recorded before it started against stored deliveries, and only those', async () => {
    const existing = new Set<string>();
    const f = fanoutHarness({ endpoints: [endpoint('ep_a'), endpoint('ep_b')], existing });
    const early = f.record('wake.error');
    f.clock.advance(10);
    await f.fanout.init();
    // The previous process made ep_a's delivery of the early event.
    existing.add(`${early.id}|ep_a`);
    f.clock.advance(10);
    const later = f.record('wake.error');
    await f.fanout.poll();
    expect(f.checked).toEqual([[early.id]]);
    const to = (id: string) =>
      f.made
        .filter((d) => d.event_id === id)
        .map((d) => d.endpoint_id)
        .sort();
    expect(to(early.id)).toEqual(['ep_b']);
    expect(to(later.id)).toEqual(['ep_a', 'ep_b']);
  });

  it('an event raised again after a crash (a second row of its id, created before this process) is delivered once', async () => {
    const existing = new Set<string>();
    const f = fanoutHarness({ endpoints: [endpoint('ep_a')], existing });
    // Raised by the process before the crash, and delivered by it.
    const first = f.record('wake.error');
    existing.add(`${first.id}|ep_a`);
    f.clock.advance(3_500);
    await f.fanout.init();
    f.clock.advance(10);
    // The restart's replayed segment raises it again: the same id, created when its wake was
    // captured, recorded now (a row of its own in the table, never merged with the first).
    f.events.push({ ...first, recorded_at: f.clock.now() });
    // And twice in one page (raised again while the first row was still unread).
    const twice = f.record('wake.error');
    f.events.push({ ...twice });
    await f.fanout.poll();
    expect(f.made.filter((d) => d.event_id === first.id)).toEqual([]);
    expect(f.made.filter((d) => d.event_id === twice.id).map((d) => d.endpoint_id)).toEqual(['ep_a']);
  });

  // Regression test: the rows of events already fanned out are remembered for 12 s of
  // recording time; a row raised again later than that (another instance of the fleet
  // restarting after a crash, its segment replayed) reached a leader running since before
  // the event was made, which delivered the event a second time.
  it('an event raised again long after it was delivered, read by a fan-out running since before it, is delivered once', async () => {
    const existing = new Set<string>();
    const f = fanoutHarness({ endpoints: [endpoint('ep_a')], existing });
    await f.fanout.init();
    f.clock.advance(10);
    const first = f.record('wake.error');
    await f.fanout.poll();
    expect(f.made.filter((d) => d.event_id === first.id)).toHaveLength(1);
    existing.add(`${first.id}|ep_a`);
    // Other events keep the cursor moving meanwhile.
    for (let i = 0; i < 6; i++) {
      f.clock.advance(5_000);
      f.record('wake.error');
      await f.fanout.poll();
    }
    f.events.push({ ...first, recorded_at: f.clock.now() });
    f.clock.advance(10);
    await f.fanout.poll();
    expect(f.made.filter((d) => d.event_id === first.id)).toHaveLength(1);
    // Only events recorded late are checked against storage, not every event.
    expect(f.checked.flat()).toEqual([first.id]);
  });

  it('sheds deliveries past max_queued_events, counting them', async () => {
    const f = fanoutHarness({
      maxQueued: 3,
      endpoints: ['ep_1', 'ep_2', 'ep_3', 'ep_4', 'ep_5'].map((id) => endpoint(id)),
    });
    await f.fanout.init();
    f.record('key.revoked');
    await f.fanout.poll();
    expect(f.made).toHaveLength(3);
    expect(f.fanout.shed).toBe(2);
    expect(await f.metrics.registry.getSingleMetricAsString('wakegate_events_shed_total')).toMatch(
      /wakegate_events_shed_total\{type="key.revoked"\} 2/,
    );
  });

  it('lets events traffic makes fill nine tenths of the queue, keeping the rest for the others', async () => {
    const f = fanoutHarness({
      maxQueued: 20,
      endpoints: Array.from({ length: 25 }, (_, i) => endpoint(`ep_${i}`)),
    });
    await f.fanout.init();
    f.record('wake.error');
    await f.fanout.poll();
    // 18 of 20 places (a tenth, rounded up, kept): the 7 other endpoints' deliveries are shed.
    expect(f.made).toHaveLength(18);
    expect(f.fanout.shed).toBe(7);
    // A revocation still finds the places kept for it (the two left, or more as deliveries end).
    f.record('key.revoked');
    await f.fanout.poll();
    expect(f.made.filter((d) => d.event_type === 'key.revoked').length).toBeGreaterThanOrEqual(2);
    expect(trafficBound(1)).toBe(1);
    expect(trafficBound(100_000)).toBe(90_000);
  });

  it('leaves the cursor where it was when the deliveries could not be written, and makes them at the next poll', async () => {
    const f = fanoutHarness();
    await f.fanout.init();
    const before = f.cursor();
    const e = f.record('wake.error');
    f.failNextAdd();
    await f.fanout.poll();
    expect(f.made).toHaveLength(0);
    expect(f.cursor()).toBe(before);
    await f.fanout.poll();
    expect(f.made.map((d) => d.event_id)).toEqual([e.id]);
    expect(f.cursor()).toBe(e.recorded_at);
  });

  it('alone on a store only it writes: reads at the start and as it records, and on a timer only to retry a read that failed', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'] });
    try {
      const f = fanoutHarness();
      await f.fanout.init();
      // Recorded before the start: the start's own read fans it out.
      const e1 = f.record('wake.error');
      f.fanout.start(250, true, true);
      await vi.advanceTimersByTimeAsync(0);
      expect(f.made.map((d) => d.event_id)).toEqual([e1.id]);
      // Idle: no read at all.
      const idle = f.reads();
      await vi.advanceTimersByTimeAsync(10 * SOLO_POLL_MS);
      expect(f.reads()).toBe(idle);
      // A read that failed is retried every SOLO_POLL_MS until one succeeds.
      const e2 = f.record('wake.error');
      f.failNextAdd();
      f.failNextAdd();
      await f.fanout.poll();
      expect(f.made).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(SOLO_POLL_MS);
      expect(f.made).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(SOLO_POLL_MS);
      expect(f.made.map((d) => d.event_id)).toEqual([e1.id, e2.id]);
      const done = f.reads();
      await vi.advanceTimersByTimeAsync(10 * SOLO_POLL_MS);
      expect(f.reads()).toBe(done);
      await f.fanout.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  it('alone on a store others may write (a ClickHouse server): reads every SOLO_POLL_MS', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'] });
    try {
      const f = fanoutHarness();
      await f.fanout.init();
      f.fanout.start(250, true);
      const before = f.reads();
      await vi.advanceTimersByTimeAsync(3 * SOLO_POLL_MS);
      expect(f.reads()).toBe(before + 3);
      await f.fanout.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  it('in a fleet, fans out only while it leads', async () => {
    let leading = false;
    const f = fanoutHarness({ leading: () => leading });
    await f.fanout.init();
    f.record('wake.error');
    await f.fanout.poll();
    expect(f.made).toHaveLength(0);
    leading = true;
    await f.fanout.poll();
    expect(f.made).toHaveLength(1);
  });
});
