import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { redeliver } from '../../src/webhooks/redeliver.js';
import { testDelivery } from '../../src/webhooks/test-delivery.js';
import { answer, dispatcherHarness, endpoint, webhooksConfig } from '../helpers/webhook-fakes.js';

/*
 * docs/webhooks.md "Storms": at most `max_queued_events` deliveries wait in memory, whoever
 * adds them: fan-out, a test send (POST .../test) or a replay (POST .../replay). Past it a
 * delivery is not stored at all (it would never be attempted).
 */

const cfg = webhooksConfig({ max_queued_events: 3 });
/** Every attempt fails: each delivery then waits hours for its retry, holding its place. */
const failing = () => dispatcherHarness({ cfg, respond: () => answer(500) });

describe('the dispatcher holds at most max_queued_events deliveries', () => {
  it('takes the first ones that fit, stores only those, and says how many it took', async () => {
    const h = failing();
    const ds = [h.delivery(), h.delivery(), h.delivery(), h.delivery(), h.delivery()];
    expect(await h.dispatcher.add(ds)).toBe(3);
    await h.dispatcher.idle();
    expect(h.dispatcher.queued).toBe(3);
    expect([...h.rows.byId.keys()].sort()).toEqual(
      ds
        .slice(0, 3)
        .map((d) => d.id)
        .sort(),
    );
    expect(await h.dispatcher.add([h.delivery()])).toBe(0);
    expect(h.rows.byId.size).toBe(3);
    expect(h.dispatcher.room()).toBe(0);
  });

  it('counts deliveries still being written: adds at once cannot pass the bound together', async () => {
    const h = failing();
    const put = h.rows.put.bind(h.rows);
    h.rows.put = async (rows) => {
      await new Promise((r) => setTimeout(r, 20));
      return put(rows);
    };
    const taken = await Promise.all(Array.from({ length: 10 }, () => h.dispatcher.add([h.delivery()])));
    expect(taken.reduce((a, b) => a + b, 0)).toBe(3);
    await h.dispatcher.idle();
    expect(h.rows.byId.size).toBe(3);
  });

  it('refuses a test send when full: 503 naming max_queued_events, with Retry-After, nothing stored', async () => {
    const h = failing();
    const send = () =>
      testDelivery({ dispatcher: h.dispatcher, clock: h.clock, endpoint: endpoint('ep_a'), maxAttempts: 8 });
    for (let i = 0; i < 3; i++) await send();
    await h.dispatcher.idle();
    const e = await send().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(GatewayError);
    expect(e).toMatchObject({ type: 'service_unavailable', status: 503 });
    expect((e as GatewayError).message).toContain('max_queued_events');
    expect((e as GatewayError).retryAfter).toBeGreaterThan(0);
    expect(h.rows.byId.size).toBe(3);
    expect(h.dispatcher.queued).toBe(3);
  });

  it('refuses a replay when full, and leaves the original to its own retries', async () => {
    const h = failing();
    const ds = [h.delivery(), h.delivery(), h.delivery()];
    await h.dispatcher.add(ds);
    await h.dispatcher.idle();
    const original = h.rows.get((ds[0] as { id: string }).id);
    expect(original).toMatchObject({ status: 'failed', attempt: 1 });
    const e = await redeliver({
      deliveries: { get: async (_env, id) => h.rows.get(id) },
      endpoints: h.endpoints,
      dispatcher: h.dispatcher,
      clock: h.clock,
      environment: 'production',
      id: original.id,
    }).catch((x: unknown) => x);
    expect(e).toMatchObject({ type: 'service_unavailable', status: 503 });
    expect((e as GatewayError).message).toContain('max_queued_events');
    // Not superseded: still waiting for its next attempt, stored as it was; no new row.
    expect(h.rows.get(original.id)).toMatchObject({ status: 'failed', next_attempt_at: original.next_attempt_at });
    expect(h.rows.get(original.id).response_body).not.toContain('superseded');
    expect(h.rows.byId.size).toBe(3);
    expect(h.dispatcher.queued).toBe(3);
    h.clock.set(original.next_attempt_at as number);
    await h.step();
    expect(h.sent.filter((s) => s.id === original.id).map((s) => s.attempt)).toEqual([1, 2]);
  });

  it('takes a replay when there is room', async () => {
    const h = failing();
    const d = h.delivery();
    await h.dispatcher.add([d]);
    await h.dispatcher.idle();
    const r = await redeliver({
      deliveries: { get: async (_env, id) => h.rows.get(id) },
      endpoints: h.endpoints,
      dispatcher: h.dispatcher,
      clock: h.clock,
      environment: 'production',
      id: d.id,
    });
    await h.dispatcher.idle();
    expect(h.rows.get(r.id)).toMatchObject({ is_replay: true, replay_of: d.id, attempt: 1 });
    expect(h.rows.get(d.id).response_body).toContain('superseded');
  });
});
