import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

/** What docs/webhooks.md and docs/events.md say of deleted endpoints, replays and webhook.test, held to the product. */
describe('webhooks as the docs describe them', () => {
  let t: TestGateway;
  let rx: Receiver;
  const clock = new ManualClock(T0);
  const api = (method: string, path: string, body?: unknown, key?: string) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(key ?? t.admin), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const register = async (events: string[]) => {
    const r = await api('POST', '/v2/webhooks/endpoints', { url: rx.url, events });
    expect(r.status).toBe(201);
    return (await r.json()) as { id: string };
  };
  const deliveries = async (q: string) => (await (await api('GET', `/v2/webhooks/deliveries?${q}`)).json()).data;
  /** Waits until the receiver has `n` requests and their outcomes are recorded. */
  const attempts = async (n: number) => {
    await rx.waitFor(n);
    await new Promise((r) => setTimeout(r, 20));
    await t.gw.dispatcher.idle();
  };

  beforeAll(async () => {
    t = await startGateway(
      { webhooks: { allow_insecure_http: true, allow_private_networks: true, jitter: 0, timeout_ms: 300 } },
      { clock },
    );
    rx = await startReceiver(clock);
    rx.answer = (_q, res) => {
      res.writeHead(500);
      res.end('broken');
    };
  });
  afterAll(async () => {
    await rx.close();
    await t.cleanup();
  });

  it("lists a deleted endpoint's deliveries by its id (dead-lettered, endpoint deleted); an unknown id or another environment's stays 404", async () => {
    const ep = await register(['key.revoked']);
    t.gw.events.emit('key.revoked', 'production', { n: 1 });
    await t.gw.events.flush();
    await attempts(1);
    await until(async () => (await deliveries(`endpoint_id=${ep.id}&status=failed`)).length === 1, 3000, 'failed');
    expect((await api('DELETE', `/v2/webhooks/endpoints/${ep.id}`)).status).toBe(200);
    await t.gw.dispatcher.flushWrites();
    const r = await api('GET', `/v2/webhooks/deliveries?endpoint_id=${ep.id}`);
    expect(r.status).toBe(200);
    const list = (await r.json()).data;
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({
      endpoint_id: ep.id,
      status: 'dead_lettered',
      response_body: 'endpoint deleted',
      next_attempt_at: null,
    });
    // Filters still apply beside it.
    expect(await deliveries(`endpoint_id=${ep.id}&status=dead_lettered`)).toHaveLength(1);
    expect(await deliveries(`endpoint_id=${ep.id}&status=pending`)).toHaveLength(0);
    // The endpoint itself stays gone.
    expect((await api('GET', `/v2/webhooks/endpoints/${ep.id}`)).status).toBe(404);
    // An id never seen is still 404.
    const unknown = await api('GET', '/v2/webhooks/deliveries?endpoint_id=we_000000000AAAAAAAAAAAAAA');
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error).toMatchObject({ type: 'resource_missing', param: 'endpoint_id' });
    // Another environment's deleted endpoint is not this environment's: 404, nothing said of it.
    const { secret } = await t.gw.keys.create(
      { label: 'sbx', environment: 'sandbox', scopes: ['webhooks:read'] },
      'sandbox',
    );
    const other = await api('GET', `/v2/webhooks/deliveries?endpoint_id=${ep.id}`, undefined, secret);
    expect(other.status).toBe(404);
    expect((await other.json()).error).toMatchObject({ type: 'resource_missing', param: 'endpoint_id' });
    const asked = await api('GET', `/v2/webhooks/deliveries?endpoint_id=${ep.id}&environment=sandbox`);
    expect(asked.status).toBe(404);
  });

  it("a replay of a failed delivery ends the original's retries and notes the replay in its response_body; it stays failed", async () => {
    const ep = await register(['key.rotated']);
    const before = rx.got.length;
    t.gw.events.emit('key.rotated', 'production', { n: 2 });
    await t.gw.events.flush();
    await attempts(before + 1);
    await until(async () => (await deliveries(`endpoint_id=${ep.id}&status=failed`)).length === 1, 3000, 'failed');
    const [failed] = await deliveries(`endpoint_id=${ep.id}&status=failed`);
    expect(failed.next_attempt_at).not.toBeNull();
    const r = await api('POST', `/v2/webhooks/deliveries/${failed.id}/replay`);
    expect(r.status).toBe(201);
    const replay = await r.json();
    await t.gw.dispatcher.flushWrites();
    const original = await (await api('GET', `/v2/webhooks/deliveries/${failed.id}`)).json();
    expect(original).toMatchObject({
      status: 'failed',
      attempt: 1,
      response_status: 500,
      next_attempt_at: null,
      response_body: `superseded by the replay ${replay.id}`,
    });
    expect(replay).toMatchObject({ is_replay: true, replay_of: failed.id, event_id: failed.event_id });
  });

  it('webhook.test is what test sends carry: a deliveries filter, never a subscription', async () => {
    const sub = await api('POST', '/v2/webhooks/endpoints', { url: rx.url, events: ['webhook.test'] });
    expect(sub.status).toBe(422);
    expect((await sub.json()).error).toMatchObject({
      param: 'events[0]',
      message: 'unknown event type "webhook.test"',
    });
    const ep = await register(['wake.slow']);
    const sent = await api('POST', `/v2/webhooks/endpoints/${ep.id}/test`);
    expect(sent.status).toBe(201);
    const d = await sent.json();
    const found = await deliveries('event_type=webhook.test');
    expect(found.map((x: { id: string }) => x.id)).toContain(d.id);
    expect(found.every((x: { event_type: string }) => x.event_type === 'webhook.test')).toBe(true);
    expect(await deliveries(`event_type=wake.slow&endpoint_id=${ep.id}`)).toEqual([]);
  });
});
