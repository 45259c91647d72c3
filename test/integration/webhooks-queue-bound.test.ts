import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

/*
 * docs/webhooks.md "Storms": at most `max_queued_events` deliveries wait in memory. Test sends
 * (POST .../test) and replays (POST .../replay) count against it like fanned-out events: past
 * it they are refused (503, Retry-After) and nothing is stored, so a webhooks:write key cannot
 * grow the queue past the bound.
 */
describe('the queue bound holds for test sends and replays', () => {
  let t: TestGateway;
  let rx: Receiver;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  beforeAll(async () => {
    rx = await startReceiver();
    rx.answer = (_q, res) => {
      res.writeHead(500);
      res.end('no');
    };
    t = await startGateway(
      { webhooks: { allow_insecure_http: true, allow_private_networks: true, max_queued_events: 5, timeout_ms: 300 } },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await rx.close();
  });

  it('refuses test sends and replays past max_queued_events with 503, storing nothing', async () => {
    const ep = await (await api('POST', '/v2/webhooks/endpoints', { url: rx.url, events: ['*'] })).json();
    const statuses: number[] = [];
    let refused: Response | null = null;
    for (let i = 0; i < 20; i++) {
      const r = await api('POST', `/v2/webhooks/endpoints/${ep.id}/test`);
      statuses.push(r.status);
      if (r.status !== 201) refused ??= r;
      else await r.body?.cancel();
    }
    expect(statuses.filter((s) => s === 201)).toHaveLength(5);
    expect(statuses.filter((s) => s === 503)).toHaveLength(15);
    expect(refused?.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    const err = (await (refused as Response).json()).error;
    expect(err).toMatchObject({ type: 'service_unavailable' });
    expect(err.message).toContain('max_queued_events');
    // Each failed test send waits (manual clock) for its 5 s retry: all five stay queued.
    await until(() => rx.got.length >= 5, 5000, 'first attempts');
    await t.gw.dispatcher.idle();
    expect(t.gw.dispatcher.queued).toBe(5);
    const list = await (await api('GET', `/v2/webhooks/deliveries?endpoint_id=${ep.id}`)).json();
    expect(list.data, 'only the deliveries taken are stored').toHaveLength(5);

    // A replay of a failed one: refused too, and the original keeps its own retries.
    const original = list.data[0];
    expect(original.status).toBe('failed');
    const r = await api('POST', `/v2/webhooks/deliveries/${original.id}/replay`);
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).not.toBeNull();
    const after = await (await api('GET', `/v2/webhooks/deliveries/${original.id}`)).json();
    expect(after).toMatchObject({ status: 'failed', attempt: 1 });
    expect(after.next_attempt_at).not.toBeNull();
    expect(t.gw.dispatcher.queued).toBe(5);
    expect((await (await api('GET', `/v2/webhooks/deliveries?endpoint_id=${ep.id}`)).json()).data).toHaveLength(5);

    // Fan-out still sheds, and counts, past the bound.
    const shedBefore = t.gw.fanout.shed;
    t.gw.events.emit('key.rotated', 'production', { key: 'k', replaces: 'j' });
    await t.gw.events.flush();
    await until(() => t.gw.fanout.shed > shedBefore, 5000, 'the real event shed');
    expect(t.gw.dispatcher.queued).toBe(5);
  });
});
