// Regression tests from a review of time handling (2026-11-27).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { answer, dispatcherHarness, MemoryRows, webhooksConfig } from '../helpers/webhook-fakes.js';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const DAY = 86_400_000;

// Review (time): a webhook retry scheduled while the host clock was far ahead, then corrected.
describe('review-time: webhook retries when a clock far in the future is corrected', () => {
  let origin: TestServer;
  let t: TestGateway;
  let rx: Receiver;
  // The VM came up with its clock 30 days ahead.
  const clock = new ManualClock(T0 + 30 * DAY);

  beforeAll(async () => {
    origin = await startServer((_req, res) => {
      res.writeHead(500);
      res.end('x');
    });
    t = await startGateway(
      {
        routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
        webhooks: { allow_insecure_http: true, allow_private_networks: true, jitter: 0, timeout_ms: 300 },
      },
      { clock },
    );
    rx = await startReceiver(clock);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
    await rx.close();
  });

  it('a delivery whose first attempt failed is retried within the schedule once the clock is put right', async () => {
    // The receiver fails the first attempt, then takes the retry.
    rx.answer = (_req, res, n) => {
      res.writeHead(n === 1 ? 503 : 200);
      res.end('');
    };
    const reg = await fetch(`${t.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ url: rx.url, events: ['wake.error'] }),
    });
    expect(reg.status).toBe(201);
    const res = await fetch(`${t.url}/api/fail`);
    expect(res.status).toBe(500);
    await res.arrayBuffer();
    await rx.waitFor(1, 5000);
    // The first attempt's outcome is settled (its retry scheduled) while the clock is still ahead.
    const deliveries = async () =>
      (
        (await (await fetch(`${t.url}/v2/webhooks/deliveries?limit=10`, { headers: bearer(t.admin) })).json()) as {
          data: { attempt: number; status: string; next_attempt_at: string | null }[];
        }
      ).data;
    const settleBy = Date.now() + 5000;
    while ((await deliveries())[0]?.status !== 'failed' && Date.now() < settleBy)
      await new Promise((r) => setTimeout(r, 20));
    expect((await deliveries())[0]).toMatchObject({ attempt: 1, status: 'failed' });

    // NTP puts the clock right (30 days back), then a whole day goes by: the schedule's
    // second attempt comes 5 s after the first, its longest single wait is 9.5 h.
    clock.set(T0);
    await new Promise((r) => setTimeout(r, 300));
    clock.set(T0 + DAY);
    const deadline = Date.now() + 3000;
    while (rx.got.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));

    expect(
      rx.got.length,
      `attempt 2 never made a day after the correction: the delivery waits for ${(await deliveries())[0]?.next_attempt_at}`,
    ).toBe(2);
  });
});

// The same rule on the dispatcher alone: retries due further ahead than the schedule allows.
describe('review-time: a retry due further ahead than the schedule allows', () => {
  const HOUR = 3_600_000;
  /** A dispatcher that has, in storage, a delivery whose attempt `attempt` failed with `status` while the clock was 30 days ahead. */
  async function resumed(attempt: number, status: number, dueIn: number) {
    const clock = new ManualClock(T0);
    const rows = new MemoryRows();
    const h = dispatcherHarness({ cfg: webhooksConfig(), clock, rows, respond: () => answer(200) });
    const d = h.delivery('ep_a', {
      created_at: T0 + 30 * DAY - HOUR,
      attempt,
      status: 'failed',
      response_status: status,
      next_attempt_at: T0 + dueIn,
      updated_at: T0 + 30 * DAY,
    });
    await rows.put([d]);
    expect(await h.dispatcher.resume()).toBe(1);
    return { ...h, d };
  }

  it('after a 500 (no Retry-After possible), it is due the longest its step can be from now (5 s and 10% jitter)', async () => {
    const f = await resumed(1, 500, 30 * DAY);
    await f.step();
    f.clock.advance(5_499);
    await f.step();
    expect(f.sent).toHaveLength(0);
    // Storage shows when it is due now.
    expect(f.rows.get(f.d.id).next_attempt_at).toBe(T0 + 5_500);
    f.clock.advance(1);
    await f.step();
    expect(f.sent.map((s) => s.attempt)).toEqual([2]);
    expect(f.rows.get(f.d.id)).toMatchObject({ status: 'delivered', attempt: 2 });
  });

  it('after a 503 (which may have carried a Retry-After), within a day from now', async () => {
    const f = await resumed(1, 503, 30 * DAY);
    await f.step();
    f.clock.advance(DAY - 1);
    await f.step();
    expect(f.sent).toHaveLength(0);
    f.clock.advance(1);
    await f.step();
    expect(f.sent.map((s) => s.attempt)).toEqual([2]);
  });

  it('one due within what the schedule allows is left as it is', async () => {
    // Its seventh attempt failed: the eighth comes 9.5 h later.
    const f = await resumed(7, 500, 9.5 * HOUR);
    await f.step();
    f.clock.advance(9.5 * HOUR - 1);
    await f.step();
    expect(f.sent).toHaveLength(0);
    expect(f.rows.get(f.d.id).next_attempt_at).toBe(T0 + 9.5 * HOUR);
    f.clock.advance(1);
    await f.step();
    expect(f.sent.map((s) => s.attempt)).toEqual([8]);
  });
});
