import { describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { AttemptOutcome } from '../../src/webhooks/sender.js';
import { answer, dispatcherHarness, endpoint, MemoryRows, webhooksConfig } from '../helpers/webhook-fakes.js';

/*
 * The dispatcher against a LocalQueue over in-memory rows, a fake sender and a
 * manual clock: 18 hours of retries and 7 days of 410s run in milliseconds.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const SCHEDULE_S = [5, 300, 1800, 3600, 7200, 18000, 34200];

describe('the dispatcher on a LocalQueue', () => {
  it('ticks while a delivery waits for its next attempt, and not while none waits', async () => {
    vi.useFakeTimers();
    try {
      const h = dispatcherHarness({ respond: (_d, n) => answer(n < 2 ? 500 : 204) });
      const ticks = vi.spyOn(h.dispatcher, 'tick');
      h.dispatcher.start(50);
      await vi.advanceTimersByTimeAsync(1000);
      // The first tick finds nothing and stops the timer.
      expect(ticks).toHaveBeenCalledTimes(1);
      const d = h.delivery();
      await h.dispatcher.add([d]);
      await h.dispatcher.idle();
      expect(h.sent).toHaveLength(1);
      // The retry is found by the tick as the clock reaches it, with no call from outside.
      ticks.mockClear();
      await vi.advanceTimersByTimeAsync(1000);
      expect(ticks).toHaveBeenCalledTimes(20);
      h.clock.set(h.rows.get(d.id).next_attempt_at as number);
      await vi.advanceTimersByTimeAsync(50);
      await h.dispatcher.idle();
      expect(h.sent.map((s) => s.attempt)).toEqual([1, 2]);
      expect(h.rows.get(d.id)).toMatchObject({ status: 'delivered' });
      await vi.advanceTimersByTimeAsync(50);
      ticks.mockClear();
      await vi.advanceTimersByTimeAsync(1000);
      expect(ticks).not.toHaveBeenCalled();
      await h.dispatcher.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  it('retries on the schedule, each wait spread by the jitter, then dead-letters after the last attempt', async () => {
    // The jitter's draws: -10%, +10%, none, in turn.
    const draws = [0, 1, 0.5];
    let k = 0;
    const h = dispatcherHarness({ respond: () => answer(500), random: () => draws[k++ % 3] as number });
    const d = h.delivery();
    await h.dispatcher.add([d]);
    await h.dispatcher.idle();
    for (let n = 2; n <= 8; n++) {
      const due = h.rows.get(d.id).next_attempt_at as number;
      const base = (SCHEDULE_S[n - 2] as number) * 1000;
      const factor = [0.9, 1.1, 1][(n - 2) % 3] as number;
      expect(due - (h.sent.at(-1)?.at as number), `wait before attempt ${n}`).toBe(Math.round(base * factor));
      // Not a millisecond early.
      h.clock.set(due - 1);
      await h.step();
      expect(h.sent).toHaveLength(n - 1);
      h.clock.set(due);
      await h.step();
      expect(h.sent).toHaveLength(n);
      expect(h.sent.at(-1)).toMatchObject({ id: d.id, attempt: n, at: due });
    }
    const last = h.rows.get(d.id);
    expect(last).toMatchObject({ status: 'dead_lettered', attempt: 8, next_attempt_at: null, response_status: 500 });
    // Eight attempts over the schedule's 18.08 hours, each wait moved by its draw.
    const span = (h.sent.at(-1)?.at as number) - (h.sent[0]?.at as number);
    const planned = SCHEDULE_S.reduce((sum, s, i) => sum + Math.round(s * 1000 * ([0.9, 1.1, 1][i % 3] as number)), 0);
    expect(span).toBe(planned);
    expect(SCHEDULE_S.reduce((a, b) => a + b, 0) / 3600).toBeCloseTo(18.08, 2);
    h.clock.advance(7 * DAY);
    await h.step();
    expect(h.sent).toHaveLength(8);
    expect(h.dispatcher.queued).toBe(0);
    // Each attempt's outcome was written with its own line of the attempts log.
    expect(h.rows.written.filter((r) => r.id === d.id && r.attempt_log).map((r) => r.attempt_log?.attempt)).toEqual([
      1, 2, 3, 4, 5, 6, 7, 8,
    ]);
  });

  it("lets a receiver's Retry-After lengthen a wait, never shorten it", async () => {
    const h = dispatcherHarness({ respond: () => answer(503, 60), random: () => 0.5 });
    const d = h.delivery();
    await h.dispatcher.add([d]);
    await h.dispatcher.idle();
    // The schedule says 5 s before attempt 2; the receiver asked for 60.
    expect(h.rows.get(d.id).next_attempt_at).toBe(h.clock.now() + 60_000);
  });

  it('stops retrying after a success', async () => {
    const h = dispatcherHarness({ respond: (_d, n) => answer(n < 5 ? 500 : 204) });
    const d = h.delivery();
    await h.dispatcher.add([d]);
    await h.dispatcher.idle();
    for (let i = 0; i < 10; i++) {
      const due = h.rows.get(d.id).next_attempt_at;
      if (due === null) break;
      h.clock.set(due);
      await h.step();
    }
    expect(h.sent.map((s) => s.attempt)).toEqual([1, 2, 3, 4, 5]);
    expect(h.rows.get(d.id)).toMatchObject({
      status: 'delivered',
      attempt: 5,
      next_attempt_at: null,
      response_status: 204,
    });
    h.clock.advance(2 * DAY);
    await h.step();
    expect(h.sent).toHaveLength(5);
    expect(h.dispatcher.queued).toBe(0);
  });

  it('disables an endpoint that answered 410 for 7 days (not 6), raises webhook.disabled, and sends it nothing more', async () => {
    const h = dispatcherHarness({ respond: () => answer(410) });
    const t0 = h.clock.now();
    // One single-attempt delivery a day, each answered 410.
    for (let day = 0; day <= 6; day++) {
      h.clock.set(t0 + day * DAY);
      await h.dispatcher.add([h.delivery('ep_a', { max_attempts: 1 })]);
      await h.dispatcher.idle();
    }
    expect(h.endpoints.get('ep_a')).toMatchObject({ status: 'enabled', first_410_at: t0 });
    expect(h.emitted).toEqual([]);
    h.clock.set(t0 + 7 * DAY);
    await h.dispatcher.add([h.delivery('ep_a', { max_attempts: 1 })]);
    await h.dispatcher.idle();
    expect(h.endpoints.get('ep_a')).toMatchObject({ status: 'disabled', disabled_at: t0 + 7 * DAY });
    expect(h.emitted).toHaveLength(1);
    expect(h.emitted[0]).toMatchObject({ type: 'webhook.disabled', environment: 'production' });
    expect(h.emitted[0]?.data.reason).toBe('answered 410 Gone for 7 consecutive days');
    // A delivery made now ends without an attempt.
    const after = h.delivery();
    await h.dispatcher.add([after]);
    await h.dispatcher.idle();
    expect(h.sent).toHaveLength(8);
    expect(h.rows.get(after.id)).toMatchObject({ status: 'dead_lettered', response_body: 'endpoint disabled' });
  });

  it('resets the run of 410s on any other answer', async () => {
    const statuses = [410, 410, 200, 410];
    let i = 0;
    const h = dispatcherHarness({ respond: () => answer(statuses[i++] as number) });
    const t0 = h.clock.now();
    for (let day = 0; day < statuses.length; day++) {
      h.clock.set(t0 + day * 3 * DAY);
      await h.dispatcher.add([h.delivery('ep_a', { max_attempts: 1 })]);
      await h.dispatcher.idle();
    }
    // 9 days since the first 410, but a 200 came in between: the run started again on day 9.
    expect(h.endpoints.get('ep_a')).toMatchObject({ status: 'enabled', first_410_at: t0 + 9 * DAY });
  });

  it('holds at most max_per_endpoint attempts per endpoint and max_concurrency in all, endpoints taking turns', async () => {
    const open: (() => void)[] = [];
    const running = new Map<string, number>();
    let most = 0;
    let mostPerEndpoint = 0;
    const h = dispatcherHarness({
      cfg: webhooksConfig({ max_per_endpoint: 2, max_concurrency: 3 }),
      endpoints: [endpoint('ep_a'), endpoint('ep_b')],
      respond: (d): Promise<AttemptOutcome> => {
        running.set(d.endpoint_id, (running.get(d.endpoint_id) ?? 0) + 1);
        const all = [...running.values()].reduce((a, b) => a + b, 0);
        most = Math.max(most, all);
        mostPerEndpoint = Math.max(mostPerEndpoint, running.get(d.endpoint_id) as number);
        return new Promise((resolve) =>
          open.push(() => {
            running.set(d.endpoint_id, (running.get(d.endpoint_id) as number) - 1);
            resolve(answer(200));
          }),
        );
      },
    });
    const rows = [
      ...Array.from({ length: 5 }, () => h.delivery('ep_a')),
      ...Array.from({ length: 5 }, () => h.delivery('ep_b')),
    ];
    await h.dispatcher.add(rows);
    await new Promise((r) => setImmediate(r));
    expect(h.sent).toHaveLength(3);
    // Neither endpoint took all three: the second is at its cap of two.
    expect(new Set(h.sent.map((s) => s.endpoint))).toEqual(new Set(['ep_a', 'ep_b']));
    expect(h.dispatcher.queued).toBe(10);
    while (open.length > 0) {
      (open.shift() as () => void)();
      await new Promise((r) => setImmediate(r));
    }
    await h.dispatcher.idle();
    expect(h.sent).toHaveLength(10);
    expect(new Set(h.sent.map((s) => s.id)).size).toBe(10);
    expect(most).toBe(3);
    expect(mostPerEndpoint).toBe(2);
    expect(h.dispatcher.queued).toBe(0);
  });

  it('resumes after a restart on the schedule, and makes an attempt whose outcome was never written again under the same number', async () => {
    const clock = new ManualClock();
    const rows = new MemoryRows();
    const first = dispatcherHarness({ clock, rows, respond: () => answer(500), random: () => 0.5 });
    const d = first.delivery();
    await first.dispatcher.add([d]);
    await first.dispatcher.idle();
    await first.dispatcher.stop();
    const due = rows.get(d.id).next_attempt_at as number;
    expect(due).toBe(clock.now() + 5000);

    // A new process on the same storage: attempt 2 on its time, not before.
    let hang: (() => void) | null = null;
    const second = dispatcherHarness({
      clock,
      rows,
      respond: (): Promise<AttemptOutcome> => new Promise((resolve) => (hang = () => resolve(answer(500)))),
    });
    expect(await second.dispatcher.resume()).toBe(1);
    expect(second.dispatcher.queued).toBe(1);
    clock.set(due - 1);
    second.dispatcher.tick();
    await new Promise((r) => setImmediate(r));
    expect(second.sent).toHaveLength(0);
    clock.set(due);
    second.dispatcher.tick();
    await new Promise((r) => setImmediate(r));
    expect(second.sent).toEqual([{ id: d.id, endpoint: 'ep_a', attempt: 2, at: due }]);
    // It dies during attempt 2: nothing of that attempt was written.
    expect(hang).not.toBeNull();
    expect(rows.get(d.id).attempt).toBe(1);

    const third = dispatcherHarness({ clock, rows, respond: () => answer(200) });
    expect(await third.dispatcher.resume()).toBe(1);
    await third.step();
    expect(third.sent).toEqual([{ id: d.id, endpoint: 'ep_a', attempt: 2, at: due }]);
    expect(rows.get(d.id)).toMatchObject({ status: 'delivered', attempt: 2 });
    // Resumed again later, nothing is left to attempt.
    const fourth = dispatcherHarness({ clock, rows, respond: () => answer(200) });
    expect(await fourth.dispatcher.resume()).toBe(0);
  });

  it('a delivery sent again by hand ends its own retries, waiting or in flight', async () => {
    let release: (() => void) | null = null;
    const h = dispatcherHarness({
      respond: (_d, n): Promise<AttemptOutcome> | AttemptOutcome =>
        n === 1 ? answer(500) : new Promise((resolve) => (release = () => resolve(answer(500)))),
    });
    const waiting = h.delivery();
    await h.dispatcher.add([waiting]);
    await h.dispatcher.idle();
    h.dispatcher.supersede(h.rows.get(waiting.id), 'dlv_new1');
    await h.dispatcher.idle();
    expect(h.rows.get(waiting.id)).toMatchObject({
      next_attempt_at: null,
      response_body: 'superseded by the replay dlv_new1',
    });
    expect(h.dispatcher.queued).toBe(0);

    const flying = h.delivery();
    await h.dispatcher.add([flying]);
    await h.dispatcher.idle();
    h.clock.set(h.rows.get(flying.id).next_attempt_at as number);
    h.dispatcher.tick();
    await new Promise((r) => setImmediate(r));
    expect(release).not.toBeNull();
    h.dispatcher.supersede(h.rows.get(flying.id), 'dlv_new2');
    (release as unknown as () => void)();
    await h.dispatcher.idle();
    expect(h.rows.get(flying.id)).toMatchObject({
      attempt: 2,
      next_attempt_at: null,
      response_body: 'superseded by the replay dlv_new2',
    });
    h.clock.advance(DAY);
    await h.step();
    expect(h.sent.filter((s) => s.id === flying.id)).toHaveLength(2);
  });

  it('dead-letters what waits for a deleted endpoint', async () => {
    const h = dispatcherHarness({ respond: () => answer(500) });
    const a = h.delivery();
    const b = h.delivery();
    await h.dispatcher.add([a, b]);
    await h.dispatcher.idle();
    expect(h.dispatcher.cancel('ep_a', 'endpoint deleted')).toBe(2);
    await h.dispatcher.idle();
    for (const d of [a, b])
      expect(h.rows.get(d.id)).toMatchObject({ status: 'dead_lettered', response_body: 'endpoint deleted' });
    expect(h.dispatcher.queued).toBe(0);
  });
});
