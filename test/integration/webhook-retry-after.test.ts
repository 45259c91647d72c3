import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import { pendingDelivery } from '../../src/webhooks/delivery.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { LocalQueue } from '../../src/webhooks/local-queue.js';
import { endpointSender } from '../../src/webhooks/sender.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { endpoint, endpointService, MemoryRows, webhooksConfig } from '../helpers/webhook-fakes.js';

/*
 * A receiver's Retry-After (on 429/503), through the real dispatcher and sender to a
 * real receiver on loopback, with the injected clock: DESIGN says it "may stretch one
 * wait, never shorten it". One answer lengthens the wait after it only (the later
 * waits are the schedule's own), and never puts an attempt later than the schedule's
 * last attempt would be (created + 5 s + 5 min + ... + 9.5 h = 18.08 h): it used to
 * be honoured up to a day, so one `Retry-After: 86400` set the next attempt a day out
 * and a receiver answering it every time kept a delivery retrying for seven days.
 */

const SCHEDULE_S = [5, 300, 1800, 3600, 7200, 18000, 34200];
const END_MS = SCHEDULE_S.reduce((a, b) => a + b, 0) * 1000;
const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

/** How the receiver answers attempt n: a status, and a Retry-After header or none. */
type Plan = (n: number, clock: ManualClock) => { status: number; retryAfter?: string };

async function harness(plan: Plan) {
  const clock = new ManualClock(T0);
  const rx = await startReceiver(clock);
  rx.answer = (_req, res: ServerResponse, n) => {
    const a = plan(n, clock);
    res.writeHead(a.status, a.retryAfter === undefined ? {} : { 'retry-after': a.retryAfter });
    res.end(String(a.status));
  };
  const cfg = webhooksConfig({ allow_insecure_http: true, allow_private_networks: true, jitter: 0, timeout_ms: 3000 });
  const rows = new MemoryRows();
  const { service } = endpointService(cfg, clock, [endpoint('we_ra', { url: `${rx.url}/hook` })]);
  const dispatcher = new Dispatcher({
    cfg,
    queue: new LocalQueue({ rows, spool: null, clock, log: silentLogger }),
    endpoints: service,
    send: endpointSender(cfg, service),
    clock,
    log: silentLogger,
    metrics: createMetrics({ process: false }),
  });
  const d = pendingDelivery(
    {
      environment: 'production',
      endpoint_id: 'we_ra',
      event_id: 'evt_retry_after',
      event_type: 'wake.error',
      payload: '{"id":"evt_retry_after"}',
      max_attempts: SCHEDULE_S.length + 1,
    },
    clock.now(),
  );
  await dispatcher.add([d]);
  await dispatcher.idle();
  /** Runs every attempt, each at its time, until the delivery ends; the receiver's clock times. */
  const runOut = async () => {
    for (let i = 0; i < 20; i++) {
      const due = rows.get(d.id).next_attempt_at;
      if (due === null) break;
      clock.set(due);
      dispatcher.tick();
      await dispatcher.idle();
    }
    return rx.got.map((g) => g.at);
  };
  const waitsS = (at: number[]) => at.slice(1).map((t, i) => (t - (at[i] as number)) / 1000);
  return { clock, rx, rows, d, dispatcher, runOut, waitsS };
}

describe("a receiver's Retry-After", () => {
  const receivers: Receiver[] = [];
  afterEach(async () => {
    for (const r of receivers.splice(0)) await r.close();
  });

  it('Retry-After: 86400 once: the next attempt comes at the latest when the schedule would end; the later waits are the schedule own', async () => {
    const h = await harness((n) => (n === 1 ? { status: 429, retryAfter: '86400' } : { status: 500 }));
    receivers.push(h.rx);
    // Not a day out: at most where the schedule puts its last attempt.
    expect(h.rows.get(h.d.id).next_attempt_at).toBe(T0 + END_MS);
    const at = await h.runOut();
    expect(at[1]).toBe(T0 + END_MS);
    // Only that one wait was stretched: 5 min, 30 min, ... as the schedule has them.
    expect(h.waitsS(at)).toEqual([END_MS / 1000, ...SCHEDULE_S.slice(1)]);
    expect(h.rows.get(h.d.id)).toMatchObject({ status: 'dead_lettered', attempt: 8 });
  });

  it('Retry-After: 86400 on every answer stretches no wait past the schedule end: no wait of a day, done in well under two schedules', async () => {
    const h = await harness(() => ({ status: 503, retryAfter: '86400' }));
    receivers.push(h.rx);
    const at = await h.runOut();
    expect(at).toHaveLength(8);
    const waits = h.waitsS(at);
    expect(Math.max(...waits)).toBeLessThan(86_400);
    // The first wait ends where the schedule ends; the receiver's later answers find no room to stretch.
    expect(waits).toEqual([END_MS / 1000, ...SCHEDULE_S.slice(1)]);
    expect((at[7] as number) - T0).toBeLessThan(2 * END_MS);
    expect(h.rows.get(h.d.id)).toMatchObject({ status: 'dead_lettered', attempt: 8, response_status: 503 });
  });

  it('lengthens the one wait after it and never shortens a wait; an HTTP date counts like seconds', async () => {
    const h = await harness((n, clock) => {
      if (n === 2) return { status: 503, retryAfter: '600' }; // the schedule says 5 min: 10 min
      if (n === 3) return { status: 429, retryAfter: '1' }; // the schedule says 30 min: still 30 min
      if (n === 4) return { status: 429, retryAfter: new Date(clock.now() + 7_200_000).toUTCString() }; // 1 h -> 2 h
      if (n === 5) return { status: 500, retryAfter: '99999' }; // not a 429 or 503: ignored
      return { status: n >= 7 ? 204 : 500 };
    });
    receivers.push(h.rx);
    const at = await h.runOut();
    expect(h.waitsS(at)).toEqual([5, 600, 1800, 7200, 7200, 18000]);
    expect(h.rows.get(h.d.id)).toMatchObject({ status: 'delivered', attempt: 7 });
  });

  it('a Retry-After asking past the schedule end, late in the schedule, never shortens the wait it has', async () => {
    // Attempt 7 comes 8.58 h in; the schedule's last wait (9.5 h) already reaches its end.
    const h = await harness((n) => (n === 7 ? { status: 429, retryAfter: '86400' } : { status: 500 }));
    receivers.push(h.rx);
    const at = await h.runOut();
    expect(h.waitsS(at)).toEqual(SCHEDULE_S);
    expect((at[7] as number) - T0).toBe(END_MS);
  });
});
