import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startReceiver, until } from '../helpers/receiver.js';

/*
 * Regression tests from a review of the webhooks against docs/webhooks.md and DESIGN.md
 * ("Errors", "The /v2 API"): an endpoint deleted while an attempt of it runs, calls that
 * take no body given one, and replays or tests an endpoint could never be sent. One
 * gateway with an injected clock (retries never sleep), real receivers on 127.0.0.1.
 */
describe('webhooks: an endpoint gone or disabled, and calls that take no body', () => {
  let t: TestGateway;
  const clock = new ManualClock(Date.now());
  const api = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // biome-ignore lint/suspicious/noExplicitAny: the tests read API answers loosely
    return { status: r.status, body: (await r.json()) as Record<string, any> };
  };
  const register = async (url: string, events: string[]) => {
    const r = await api('POST', '/v2/webhooks/endpoints', { url, events });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body;
  };
  const delivery = async (id: string) => (await api('GET', `/v2/webhooks/deliveries/${id}`)).body;

  beforeAll(async () => {
    t = await startGateway(
      { webhooks: { allow_insecure_http: true, allow_private_networks: true, jitter: 0, timeout_ms: 2000 } },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it('deleting an endpoint while an attempt is under way ends that delivery too: dead_lettered, "endpoint deleted", no next attempt', async () => {
    const rx = await startReceiver(clock);
    // The attempt is under way when the endpoint is deleted, and then fails.
    rx.answer = (_q, res) => setTimeout(() => res.writeHead(500).end('no'), 400);
    try {
      const ep = await register(rx.url, ['key.rotated']);
      t.gw.events.emit('key.rotated', 'production', { n: 1 });
      await t.gw.events.flush();
      await rx.waitFor(1, 3000);
      expect((await api('DELETE', `/v2/webhooks/endpoints/${ep.id}`)).status).toBe(200);
      // The attempt under way finishes (500) and its outcome is written.
      await until(
        async () => {
          await t.gw.dispatcher.flushWrites();
          const [d] = (await api('GET', `/v2/webhooks/deliveries?endpoint_id=${ep.id}`)).body.data;
          return d?.attempt === 1;
        },
        3000,
        'the attempt under way to settle',
      );
      const [d] = (await api('GET', `/v2/webhooks/deliveries?endpoint_id=${ep.id}`)).body.data;
      // docs/webhooks.md: deleting an endpoint ends its deliveries: each is dead_lettered at once with
      // response_body "endpoint deleted", and none is sent again. A retry scheduled after the deletion
      // (status failed, next_attempt_at set) contradicts that.
      expect({ status: d.status, next_attempt_at: d.next_attempt_at, response_body: d.response_body }).toEqual({
        status: 'dead_lettered',
        next_attempt_at: null,
        response_body: 'endpoint deleted',
      });
      // Past the retry's time (5 s on the schedule): nothing more is sent, nor is it recorded
      // as "endpoint disabled" (which it was, when its retry came, before the fix).
      clock.advance(6000);
      t.gw.dispatcher.tick();
      await t.gw.dispatcher.idle();
      const [after] = (await api('GET', `/v2/webhooks/deliveries?endpoint_id=${ep.id}`)).body.data;
      expect(after.response_body).toBe('endpoint deleted');
      expect(rx.got.length).toBe(1);
    } finally {
      await rx.close();
    }
  });

  it('unknown body fields on test, rotate-secret, replay and delete are 400 invalid_request naming the field', async () => {
    const rx = await startReceiver(clock);
    rx.answer = (_q, res) => res.writeHead(500).end();
    try {
      const ep = await register(rx.url, ['key.revoked']);
      const first = await api('POST', `/v2/webhooks/endpoints/${ep.id}/test`);
      expect(first.status).toBe(201);
      await until(async () => (await delivery(first.body.id)).status === 'failed', 3000, 'a failed delivery');
      const before = rx.got.length;
      const calls: [string, string][] = [
        ['POST', `/v2/webhooks/endpoints/${ep.id}/test`],
        ['POST', `/v2/webhooks/endpoints/${ep.id}/rotate-secret`],
        ['POST', `/v2/webhooks/deliveries/${first.body.id}/replay`],
        ['DELETE', `/v2/webhooks/endpoints/${ep.id}`],
      ];
      const seen: Record<string, unknown> = {};
      for (const [method, path] of calls) {
        const r = await api(method, path, { bogus_field: 1 });
        seen[`${method} ${path}`] = { status: r.status, error: r.body.error ?? null };
      }
      // DESIGN.md, Errors: "Unknown query parameters and body fields are 400 invalid_request naming param".
      for (const [method, path] of calls) {
        expect(seen[`${method} ${path}`], `${method} ${path}`).toMatchObject({
          status: 400,
          error: { type: 'invalid_request', param: 'bogus_field' },
        });
      }
      // And a refused call changes nothing: the endpoint is still there, nothing more was sent.
      await new Promise((r) => setTimeout(r, 300));
      expect((await api('GET', `/v2/webhooks/endpoints/${ep.id}`)).status).toBe(200);
      expect(rx.got.length).toBe(before);
    } finally {
      await rx.close();
    }
  });

  it('replaying a delivery of a deleted endpoint is refused, not a 201 for a delivery that is never sent', async () => {
    const rx = await startReceiver(clock);
    rx.answer = (_q, res) => res.writeHead(500).end();
    try {
      const ep = await register(rx.url, ['key.revoked']);
      const first = await api('POST', `/v2/webhooks/endpoints/${ep.id}/test`);
      await until(async () => (await delivery(first.body.id)).status === 'failed', 3000, 'a failed delivery');
      expect((await api('DELETE', `/v2/webhooks/endpoints/${ep.id}`)).status).toBe(200);
      const r = await api('POST', `/v2/webhooks/deliveries/${first.body.id}/replay`);
      // The endpoint is gone (404 on every read and write of it); a replay to it can never be sent.
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      expect(r.body.error).toMatchObject({ type: 'conflict', param: 'delivery_id' });
      expect(r.body.error.message).toContain('deleted');
    } finally {
      await rx.close();
    }
  });

  it('a disabled endpoint takes neither a replay nor a test send (409, saying to enable it), and does once enabled', async () => {
    const rx = await startReceiver(clock);
    rx.answer = (_q, res) => res.writeHead(500).end();
    try {
      const ep = await register(rx.url, ['key.revoked']);
      const first = await api('POST', `/v2/webhooks/endpoints/${ep.id}/test`);
      await until(async () => (await delivery(first.body.id)).status === 'failed', 3000, 'a failed delivery');
      expect((await api('PATCH', `/v2/webhooks/endpoints/${ep.id}`, { status: 'disabled' })).status).toBe(200);
      const replay = await api('POST', `/v2/webhooks/deliveries/${first.body.id}/replay`);
      expect(replay.status, JSON.stringify(replay.body)).toBe(409);
      expect(replay.body.error).toMatchObject({ type: 'conflict', param: 'delivery_id' });
      expect(replay.body.error.message).toContain('PATCH status: enabled');
      const test = await api('POST', `/v2/webhooks/endpoints/${ep.id}/test`);
      expect(test.status, JSON.stringify(test.body)).toBe(409);
      expect(test.body.error).toMatchObject({ type: 'conflict', param: 'endpoint_id' });
      expect((await api('PATCH', `/v2/webhooks/endpoints/${ep.id}`, { status: 'enabled' })).status).toBe(200);
      expect((await api('POST', `/v2/webhooks/deliveries/${first.body.id}/replay`)).status).toBe(201);
      expect((await api('POST', `/v2/webhooks/endpoints/${ep.id}/test`)).status).toBe(201);
    } finally {
      await rx.close();
    }
  });
});
