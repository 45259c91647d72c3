import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { verifySignature } from '../../src/webhooks/signer.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { deadPort, startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

const SCHEDULE = [5, 300, 1800, 3600, 7200, 18000, 34200];
const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

describe('webhooks', () => {
  let origin: TestServer;
  let t: TestGateway;
  const clock = new ManualClock(T0);
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const register = async (url: string, events: string[]) => {
    const r = await api('POST', '/v2/webhooks/endpoints', { url, events });
    expect(r.status).toBe(201);
    return r.json();
  };
  const deliveries = async (q: string) => (await (await api('GET', `/v2/webhooks/deliveries?${q}`)).json()).data;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      res.writeHead(req.url?.includes('fail') ? 500 : 200);
      res.end('x');
    });
    t = await startGateway(
      {
        routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
        webhooks: { allow_insecure_http: true, allow_private_networks: true, jitter: 0, timeout_ms: 300 },
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('an origin 500 becomes a signed wake.error delivery within a second', async () => {
    const rx = await startReceiver(clock);
    try {
      const ep = await register(rx.url, ['wake.error']);
      expect(ep).toMatchObject({
        object: 'webhook_endpoint',
        events: ['wake.error'],
        status: 'enabled',
        environment: 'production',
      });
      expect(ep.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      expect(Buffer.from(ep.secret.slice(6), 'base64')).toHaveLength(32);
      const sent = Date.now();
      const res = await fetch(`${t.url}/api/fail`);
      expect(res.status).toBe(500);
      const wakeId = res.headers.get('x-wake-id');
      const [got] = await rx.waitFor(1, 3000);
      const latency = Date.now() - sent;
      expect(latency).toBeLessThan(1000);
      const h = got?.headers ?? {};
      // An independent Stripe-style check: HMAC-SHA256 over "<t>.<raw body>" keyed by the whole secret.
      const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(h['x-service-signature']));
      expect(m).not.toBeNull();
      const mac = createHmac('sha256', ep.secret).update(`${m?.[1]}.${got?.body}`).digest('hex');
      expect(mac).toBe(m?.[2]);
      expect(Number(m?.[1])).toBe(Math.floor(clock.now() / 1000));
      expect(
        verifySignature(
          got?.body ?? '',
          String(h['x-service-signature']),
          ep.secret,
          300,
          Math.floor(clock.now() / 1000),
        ),
      ).toBe(true);
      expect(
        verifySignature(
          `${got?.body} `,
          String(h['x-service-signature']),
          ep.secret,
          300,
          Math.floor(clock.now() / 1000),
        ),
      ).toBe(false);
      expect(
        verifySignature(
          got?.body ?? '',
          String(h['x-service-signature']),
          ep.secret,
          300,
          Math.floor(clock.now() / 1000) + 301,
        ),
      ).toBe(false);
      const body = JSON.parse(got?.body ?? '{}');
      expect(body).toMatchObject({
        type: 'wake.error',
        environment: 'production',
        created: Math.floor(clock.now() / 1000),
      });
      expect(body.id).toMatch(/^evt_/);
      expect(body.data.wake).toMatchObject({ id: wakeId, status: 500, path: '/api/fail' });
      expect(h).toMatchObject({
        'x-service-event-type': 'wake.error',
        'x-service-event-id': body.id,
        'x-service-attempt': '1/8',
        'content-type': 'application/json',
      });
      expect(h['x-service-delivery-id']).toMatch(/^dlv_/);
      expect(h['x-service-replay']).toBeUndefined();
      await until(
        async () => (await deliveries(`endpoint_id=${ep.id}&status=delivered`)).length === 1,
        3000,
        'delivered',
      );
      const [d] = await deliveries(`endpoint_id=${ep.id}`);
      expect(d).toMatchObject({
        object: 'delivery',
        endpoint_id: ep.id,
        event_type: 'wake.error',
        attempt: 1,
        max_attempts: 8,
        status: 'delivered',
        response_status: 200,
        is_replay: false,
        replay_of: null,
      });
    } finally {
      await rx.close();
    }
  });

  const emit = (
    type: Parameters<typeof t.gw.events.emit>[0],
    env = 'production',
    data: Record<string, unknown> = { n: 1 },
  ) => {
    t.gw.events.emit(type, env, data);
    return t.gw.events.flush();
  };
  const quiet = (ms = 150) => new Promise((r) => setTimeout(r, ms));
  /** Waits for `n` requests at the receiver and for the dispatcher to record their outcomes. */
  const attempts = async (rx: Receiver, n: number) => {
    await rx.waitFor(n);
    await until(() => rx.got.length === n, 1000);
    await new Promise((r) => setTimeout(r, 10));
    await t.gw.dispatcher.idle();
  };

  it('sends only subscribed types, all with "*", and only from the endpoint environment', async () => {
    const slow = await startReceiver(clock);
    const all = await startReceiver(clock);
    const sbx = await startReceiver(clock);
    try {
      const a = await register(slow.url, ['wake.slow']);
      const b = await register(all.url, ['*']);
      const { secret } = await t.gw.keys.create(
        { label: 'sbx', environment: 'sandbox', scopes: ['webhooks:write', 'webhooks:read'] },
        'sandbox',
      );
      const r = await fetch(`${t.url}/v2/webhooks/endpoints`, {
        method: 'POST',
        headers: { ...bearer(secret), 'content-type': 'application/json' },
        body: JSON.stringify({ url: sbx.url, events: ['*'] }),
      });
      expect(r.status).toBe(201);
      await emit('wake.slow');
      await emit('key.rotated');
      await emit('key.rotated', 'sandbox');
      await all.waitFor(2);
      await slow.waitFor(1);
      await sbx.waitFor(1);
      await quiet();
      expect(slow.got.map((g) => g.headers['x-service-event-type'])).toEqual(['wake.slow']);
      expect(all.got.map((g) => g.headers['x-service-event-type']).sort()).toEqual(['key.rotated', 'wake.slow']);
      expect(sbx.got.map((g) => JSON.parse(g.body).environment)).toEqual(['sandbox']);
      const list = await (await api('GET', '/v2/webhooks/endpoints')).json();
      const ids = list.data.map((e: { id: string }) => e.id);
      expect(ids).toContain(a.id);
      expect(ids).toContain(b.id);
      expect(
        list.data.every(
          (e: { environment: string; secret?: string }) => e.environment === 'production' && e.secret === undefined,
        ),
      ).toBe(true);
      const sandboxList = await (await fetch(`${t.url}/v2/webhooks/endpoints`, { headers: bearer(secret) })).json();
      expect(sandboxList.data).toHaveLength(1);
      expect(
        (await fetch(`${t.url}/v2/webhooks/deliveries?endpoint_id=${a.id}`, { headers: bearer(secret) })).status,
      ).toBe(404);
    } finally {
      await Promise.all([slow.close(), all.close(), sbx.close()]);
    }
  });

  it('validates registrations, naming param', async () => {
    const cases: [unknown, number, string][] = [
      [{ url: 'https://example.com/x' }, 400, 'events'],
      [{ url: 'https://example.com/x', events: ['wake.error'], extra: 1 }, 400, 'extra'],
      [{ url: 5, events: ['wake.error'] }, 400, 'url'],
      [{ url: 'not a url', events: ['wake.error'] }, 422, 'url'],
      [{ url: 'ftp://example.com/x', events: ['wake.error'] }, 422, 'url'],
      [{ url: 'http://127.0.0.1:1/x', events: ['nope.event'] }, 422, 'events[0]'],
      [{ url: 'http://127.0.0.1:1/x', events: [] }, 422, 'events'],
      [{ url: 'http://127.0.0.1:1/x', events: ['*', 'wake.error'] }, 422, 'events'],
      [{ url: 'http://127.0.0.1:1/x', events: ['wake.error', 'wake.error'] }, 422, 'events[1]'],
    ];
    for (const [body, status, param] of cases) {
      const r = await api('POST', '/v2/webhooks/endpoints', body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect((await r.json()).error.param, JSON.stringify(body)).toBe(param);
    }
    const reader = (
      await t.gw.keys.create({ label: 'r', environment: 'production', scopes: ['webhooks:read'] }, 'production')
    ).secret;
    const r = await fetch(`${t.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...bearer(reader), 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'http://127.0.0.1:1', events: ['*'] }),
    });
    expect(r.status).toBe(403);
    expect((await r.json()).error.message).toContain('webhooks:write');
    expect((await api('GET', '/v2/webhooks/deliveries?status=bogus')).status).toBe(400);
    expect((await api('GET', '/v2/webhooks/deliveries?endpoint_id=we_nope')).status).toBe(404);
  });

  it("replaying a failed delivery ends the original's own retries: the receiver gets the event delivered once", async () => {
    const rx = await startReceiver(clock);
    rx.answer = (_q, res, n) => {
      res.writeHead(n === 1 ? 500 : 200);
      res.end(n === 1 ? 'broken' : 'ok');
    };
    try {
      const ep = await register(rx.url, ['key.revoked']);
      await emit('key.revoked');
      await attempts(rx, 1);
      const [failed] = await deliveries(`endpoint_id=${ep.id}&status=failed`);
      expect(failed).toMatchObject({ status: 'failed', attempt: 1 });
      const r = await api('POST', `/v2/webhooks/deliveries/${failed.id}/replay`);
      expect(r.status).toBe(201);
      await attempts(rx, 2);
      // The original's retry would have come 5 s later: it does not.
      clock.advance((SCHEDULE[0] as number) * 1000 + 1);
      await quiet(300);
      clock.advance(86_400_000);
      await quiet(300);
      expect(rx.got.length).toBe(2);
      await t.gw.dispatcher.flushWrites();
      const original = await (await api('GET', `/v2/webhooks/deliveries/${failed.id}`)).json();
      expect(original.next_attempt_at).toBeNull();
      expect(original.attempt).toBe(1);
    } finally {
      await rx.close();
    }
  });

  it('makes eight attempts on the schedule (about 18 hours), then dead-letters; a replay is marked on the wire', async () => {
    const rx = await startReceiver(clock);
    rx.answer = (_q, res) => {
      res.writeHead(500);
      res.end('broken');
    };
    try {
      const ep = await register(rx.url, ['slo.burn']);
      const start = clock.now();
      await emit('slo.burn');
      await attempts(rx, 1);
      for (let k = 1; k <= 7; k++) {
        clock.advance((SCHEDULE[k - 1] as number) * 1000 - 1);
        await quiet();
        expect(rx.got.length, `attempt ${k + 1} came early`).toBe(k);
        clock.advance(1);
        await attempts(rx, k + 1);
      }
      await quiet();
      clock.advance(86_400_000);
      await quiet(300);
      expect(rx.got.length).toBe(8);
      expect(rx.got.map((g) => g.headers['x-service-attempt'])).toEqual([
        '1/8',
        '2/8',
        '3/8',
        '4/8',
        '5/8',
        '6/8',
        '7/8',
        '8/8',
      ]);
      const gaps = rx.got.slice(1).map((g, i) => (g.at - (rx.got[i] as { at: number }).at) / 1000);
      expect(gaps).toEqual(SCHEDULE);
      expect(((rx.got[7] as { at: number }).at - start) / 3_600_000).toBeCloseTo(18.08, 1);
      expect(new Set(rx.got.map((g) => g.headers['x-service-delivery-id'])).size).toBe(1);
      await until(
        async () => (await deliveries(`endpoint_id=${ep.id}&status=dead_lettered`)).length === 1,
        3000,
        'dead letter',
      );
      const [dead] = await deliveries(`endpoint_id=${ep.id}&status=dead_lettered`);
      expect(dead).toMatchObject({ attempt: 8, response_status: 500, response_body: 'broken', next_attempt_at: null });
      rx.answer = (_q, res) => res.end('fine now');
      const r = await api('POST', `/v2/webhooks/deliveries/${dead.id}/replay`);
      expect(r.status).toBe(201);
      const replay = await r.json();
      expect(replay).toMatchObject({
        is_replay: true,
        replay_of: dead.id,
        event_id: dead.event_id,
        status: 'pending',
        attempt: 0,
      });
      const got = await rx.waitFor(9);
      expect(got[8]?.headers).toMatchObject({
        'x-service-replay': 'true',
        'x-service-attempt': '1/8',
        'x-service-delivery-id': replay.id,
        'x-service-event-id': dead.event_id,
      });
      await until(
        async () => (await deliveries(`endpoint_id=${ep.id}&status=delivered`)).length === 1,
        3000,
        'replay delivered',
      );
      const again = await api('POST', `/v2/webhooks/deliveries/${replay.id}/replay`);
      expect(again.status).toBe(409);
      expect((await again.json()).error.type).toBe('conflict');
      expect((await api('POST', '/v2/webhooks/deliveries/dlv_000000000AAAAAAAAAAAAAA/replay')).status).toBe(404);
    } finally {
      await rx.close();
    }
  });

  it('stops retrying after a success on attempt 5', async () => {
    const rx = await startReceiver(clock);
    rx.answer = (_q, res, n) => {
      res.writeHead(n < 5 ? 503 : 204);
      res.end();
    };
    try {
      const ep = await register(rx.url, ['replay.finished']);
      await emit('replay.finished');
      await attempts(rx, 1);
      for (let k = 1; k <= 4; k++) {
        clock.advance((SCHEDULE[k - 1] as number) * 1000);
        await attempts(rx, k + 1);
      }
      clock.advance(86_400_000);
      await quiet(300);
      expect(rx.got.length).toBe(5);
      await until(async () => (await deliveries(`endpoint_id=${ep.id}`))[0]?.status === 'delivered', 3000, 'delivered');
      expect((await deliveries(`endpoint_id=${ep.id}`))[0]).toMatchObject({ attempt: 5, response_status: 204 });
    } finally {
      await rx.close();
    }
  });

  it('counts a redirect, a 500, a timeout and a refused connection as failed attempts', async () => {
    const redirect = await startServer((_q, res) => {
      res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' });
      res.end();
    });
    const error = await startServer((_q, res) => {
      res.writeHead(500);
      res.end('no');
    });
    const hang = await startServer(() => {});
    const dead = await deadPort();
    try {
      const eps = {
        redirect: await register(redirect.url, ['key.revoked']),
        error: await register(error.url, ['key.revoked']),
        hang: await register(hang.url, ['key.revoked']),
        refused: await register(`http://127.0.0.1:${dead}/hook`, ['key.revoked']),
      };
      await emit('key.revoked');
      const expected: Record<string, number | null> = { redirect: 302, error: 500, hang: null, refused: null };
      for (const [name, ep] of Object.entries(eps)) {
        await until(
          async () => (await deliveries(`endpoint_id=${ep.id}`))[0]?.status === 'failed',
          3000,
          `${name} failed`,
        );
        const [d] = await deliveries(`endpoint_id=${ep.id}`);
        expect(d, name).toMatchObject({ status: 'failed', attempt: 1, response_status: expected[name] });
        expect(d.next_attempt_at).toBe(new Date(clock.now() + 5000).toISOString());
      }
      expect((await deliveries(`endpoint_id=${eps.hang.id}`))[0].response_body).toMatch(/no answer within 300 ms/);
      expect((await deliveries(`endpoint_id=${eps.refused.id}`))[0].response_body).toBe('ECONNREFUSED');
    } finally {
      await Promise.all([redirect.close(), error.close(), hang.close()]);
    }
  });

  it('disables an endpoint after 7 days of 410 (not 6), tells the others, and a 200 in between resets the count', async () => {
    const DAY = 86_400_000;
    const gone = await startReceiver(clock);
    gone.answer = (_q, res) => {
      res.writeHead(410);
      res.end();
    };
    const flaky = await startReceiver(clock);
    let flakyOk = false;
    flaky.answer = (_q, res) => {
      res.writeHead(flakyOk ? 200 : 410);
      res.end();
    };
    const watcher = await startReceiver(clock);
    try {
      const g = await register(gone.url, ['consumer.quota.warning']);
      const f = await register(flaky.url, ['webhook.disabled', 'consumer.quota.warning']);
      await register(watcher.url, ['webhook.disabled']);
      const status = async (id: string) =>
        (await (await api('GET', '/v2/webhooks/endpoints?limit=100')).json()).data.find(
          (e: { id: string }) => e.id === id,
        ).status;
      const day0 = clock.now();
      for (let d = 0; d <= 7; d++) {
        clock.set(day0 + d * DAY);
        if (d === 3) flakyOk = true;
        if (d === 4) flakyOk = false;
        const before = gone.got.length;
        await emit('consumer.quota.warning');
        await gone.waitFor(before + 1);
        await quiet();
        await t.gw.dispatcher.idle();
        if (d < 7) expect(await status(g.id), `day ${d}`).toBe('enabled');
      }
      expect(await status(g.id)).toBe('disabled');
      const [note] = await watcher.waitFor(1);
      const ev = JSON.parse(note?.body ?? '{}');
      expect(ev).toMatchObject({ type: 'webhook.disabled', data: { endpoint: { id: g.id, status: 'disabled' } } });
      expect(ev.data.reason).toMatch(/410/);
      // The flaky one answered 200 on day 3, so on day 7 its run of 410s is 3 days long.
      expect(await status(f.id)).toBe('enabled');
      expect(flaky.got.some((x) => JSON.parse(x.body).type === 'webhook.disabled')).toBe(true);
      // A disabled endpoint gets nothing more.
      const seen = gone.got.length;
      await emit('consumer.quota.warning');
      await quiet(300);
      expect(gone.got.length).toBe(seen);
    } finally {
      await Promise.all([gone.close(), flaky.close(), watcher.close()]);
    }
  });

  it('resumes a schedule after a restart, without resending an attempt as new', async () => {
    const rx = await startReceiver(clock);
    rx.answer = (_q, res) => {
      res.writeHead(500);
      res.end();
    };
    try {
      await register(rx.url, ['key.rotated']);
      await emit('key.rotated', 'production', { restart: true });
      await attempts(rx, 1);
      clock.advance(5000);
      await attempts(rx, 2);
      await quiet();
      await t.stop();
      t = await startGateway(
        {
          routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
          webhooks: { allow_insecure_http: true, allow_private_networks: true, jitter: 0, timeout_ms: 300 },
        },
        { clock, dir: t.dir, admin: t.admin },
      );
      await quiet(300);
      expect(rx.got.length).toBe(2);
      clock.advance(300_000);
      await rx.waitFor(3);
      await quiet(300);
      expect(rx.got.map((g) => g.headers['x-service-attempt'])).toEqual(['1/8', '2/8', '3/8']);
      expect(new Set(rx.got.map((g) => g.headers['x-service-delivery-id'])).size).toBe(1);
    } finally {
      await rx.close();
    }
  });
});

describe('the fan-out poll', () => {
  /** Reads of the events table by the fan-out while `run` runs. */
  const eventPolls = async (t: TestGateway, run: () => Promise<void>): Promise<number> => {
    const client = t.gw.store.client;
    let n = 0;
    const orig = client.query.bind(client);
    client.query = ((...args: Parameters<typeof client.query>) => {
      if (/FROM \S+\.events\s/.test(args[0].query) && args[0].query.includes('ORDER BY recorded_at')) n++;
      return orig(...args);
    }) as typeof client.query;
    try {
      await run();
    } finally {
      client.query = orig;
    }
    return n;
  };
  const idle = (ms: number) => () => new Promise<void>((r) => setTimeout(r, ms));

  it('alone, reads the events table when this instance records events, not four times a second', async () => {
    const rx = await startReceiver();
    const t = await startGateway({ webhooks: { allow_insecure_http: true, allow_private_networks: true } });
    try {
      const r = await fetch(`${t.url}/v2/webhooks/endpoints`, {
        method: 'POST',
        headers: { ...bearer(t.admin), 'content-type': 'application/json' },
        body: JSON.stringify({ url: rx.url, events: ['key.rotated'] }),
      });
      expect(r.status).toBe(201);
      // The timer's first poll is 5 s after the start: an idle second reads nothing.
      expect(await eventPolls(t, idle(1200))).toBe(0);
      const polls = await eventPolls(t, async () => {
        t.gw.events.emit('key.rotated', 'production', { alone: true });
        await rx.waitFor(1, 3000);
      });
      expect(polls).toBeGreaterThanOrEqual(1);
      expect(JSON.parse(rx.got[0]?.body ?? '{}')).toMatchObject({ type: 'key.rotated', data: { alone: true } });
    } finally {
      await t.cleanup();
      await rx.close();
    }
  });
});
