// Regression tests from a review of the event rules (2026-11-27).
// What held in a review of the event rules (through the real listeners).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { EventTable } from '../../src/store/events.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

describe('event rules that held', () => {
  let origin: TestServer;
  let t: TestGateway;
  let prod: Receiver;
  let sbx: Receiver;
  let only: Receiver;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));
  const values = {
    routes: [
      {
        name: 'api',
        prefix: '/api',
        scopes: { read: 'api:read', write: 'api:write' },
        latency_objective_ms: 1000,
        origins: { production: '', sandbox: '' },
      },
    ],
    webhooks: {
      allow_insecure_http: true,
      allow_private_networks: true,
      jitter: 0,
      timeout_ms: 300,
      max_queued_events: 40,
    },
  };
  const api = (secret: string, method: string, path: string, body?: unknown) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(secret), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const events = async (type: string) => {
    await flushed(t.gw);
    await t.gw.events.flush();
    return new EventTable(t.gw.store).list({ type });
  };

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      const u = req.url ?? '';
      const status = u.includes('fail') ? 502 : u.includes('missing') ? 404 : 200;
      res.writeHead(status);
      // /api/slow answers after 1.1 s (latency is measured on the monotonic clock).
      if (u.includes('slow')) setTimeout(() => res.end('x'), 1100);
      else res.end('x');
    });
    const r = values.routes[0] as { origins: Record<string, string> };
    r.origins.production = origin.url;
    r.origins.sandbox = origin.url;
    [prod, sbx, only] = await Promise.all([startReceiver(clock), startReceiver(clock), startReceiver(clock)]);
    t = await startGateway(values, { clock });
  });
  afterAll(async () => {
    await t.cleanup();
    await Promise.all([origin.close(), prod.close(), sbx.close(), only.close()]);
  });

  it('wake.error: 5xx only (not 4xx, not the gateway refusals), payload without the key, its query, or request detail', async () => {
    const k = await t.gw.keys.create({ label: 'c', environment: 'production', scopes: ['api:read'] }, 'production');
    await (
      await fetch(`${t.url}/api/fail?password=hunter2&token=abc`, {
        headers: { ...bearer(k.secret), 'user-agent': `ua ${k.secret}` },
      })
    ).arrayBuffer();
    await (await fetch(`${t.url}/api/missing`, { headers: bearer(k.secret) })).arrayBuffer();
    await (await fetch(`${t.url}/api/x`, { headers: bearer('svc_live_nope') })).arrayBuffer(); // 401
    await (await fetch(`${t.url}/api/x`)).arrayBuffer(); // 401 (no key)
    const ev = await events('wake.error');
    expect(ev.map((e) => (e.data.wake as { status: number }).status)).toEqual([502]);
    const text = JSON.stringify(ev[0]);
    expect(text).not.toContain(k.secret);
    expect(text).not.toContain('hunter2');
    expect(text).not.toContain('abc');
    expect(Object.keys(ev[0]?.data.wake as object)).not.toContain('request');
    expect(text.length).toBeLessThan(4096);
  });

  it('wake.slow carries objective_ms, per route', async () => {
    const k = await t.gw.keys.create({ label: 's', environment: 'production', scopes: ['api:read'] }, 'production');
    await (await fetch(`${t.url}/api/slow`, { headers: bearer(k.secret) })).arrayBuffer();
    const ev = await events('wake.slow');
    expect(ev).toHaveLength(1);
    expect(ev[0]?.data).toMatchObject({ objective_ms: 1000, wake: { route: 'api', path: '/api/slow' } });
    expect((ev[0]?.data.wake as { latency_ms: number } | undefined)?.latency_ms).toBeGreaterThan(1000);
    expect(ev[0]?.id).toMatch(/^evt_/);
  });

  it('an endpoint gets only its environment and its types ("*": all but webhook.test)', async () => {
    // The earlier tests' events are fanned out (to no endpoint) before these endpoints exist:
    // one read late, on a loaded host, would reach them (they are told events already raised).
    await t.gw.events.flush();
    await t.gw.fanout?.poll();
    const sk = await t.gw.keys.create(
      { label: 'sk', environment: 'sandbox', scopes: ['api:read', 'webhooks:write'] },
      'sandbox',
    );
    expect((await api(t.admin, 'POST', '/v2/webhooks/endpoints', { url: prod.url, events: ['*'] })).status).toBe(201);
    expect(
      (await api(t.admin, 'POST', '/v2/webhooks/endpoints', { url: only.url, events: ['key.revoked'] })).status,
    ).toBe(201);
    expect((await api(sk.secret, 'POST', '/v2/webhooks/endpoints', { url: sbx.url, events: ['*'] })).status).toBe(201);
    const pk = await t.gw.keys.create({ label: 'p', environment: 'production', scopes: ['api:read'] }, 'production');
    await (await api(sk.secret, 'GET', '/api/fail')).arrayBuffer(); // sandbox wake.error
    await (await api(pk.secret, 'GET', '/api/fail')).arrayBuffer(); // production wake.error
    expect((await api(t.admin, 'DELETE', `/v2/api-keys/${pk.key.id}`)).status).toBe(200);
    await until(() => prod.got.length >= 2 && sbx.got.length >= 1 && only.got.length >= 1, 5000, 'deliveries');
    await new Promise((r) => setTimeout(r, 300));
    const seen = (rx: Receiver) =>
      rx.got.map((g) => `${JSON.parse(g.body).environment} ${JSON.parse(g.body).type}`).sort();
    expect(seen(prod)).toEqual(['production key.revoked', 'production wake.error']);
    expect(seen(sbx)).toEqual(['sandbox wake.error']);
    expect(seen(only)).toEqual(['production key.revoked']);
  });

  it('a flood of 600 failing requests holds the delivery queue at max_queued_events (the rest are shed, events recorded)', async () => {
    const k = await t.gw.keys.create({ label: 'f', environment: 'production', scopes: ['api:read'] }, 'production');
    prod.answer = (_q, res) => {
      res.writeHead(500);
      res.end();
    };
    const before = (await events('wake.error')).length;
    for (let i = 0; i < 600; i++) await (await api(k.secret, 'GET', `/api/fail/${i}`)).arrayBuffer();
    await until(async () => (await events('wake.error')).length === before + 600, 10_000, 'recorded');
    await new Promise((r) => setTimeout(r, 500));
    expect(t.gw.dispatcher.queued).toBeLessThanOrEqual(40);
    expect(t.gw.fanout?.shed).toBeGreaterThanOrEqual(560);
  });
});

describe('consumer.quota.warning across a clean restart', () => {
  let origin: TestServer;
  let t: TestGateway | null = null;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));
  const values = {
    routes: [
      { name: 'api', prefix: '/api', scopes: { read: 'api:read', write: 'api:write' }, origins: { production: '' } },
    ],
  };
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end('ok');
    });
    (values.routes[0] as { origins: Record<string, string> }).origins.production = origin.url;
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin.close();
  });

  it('fires 80% before the restart and only 95% after it, in the same window; A and its replacement share one count', async () => {
    t = await startGateway(values, { clock });
    const a = await t.gw.keys.create(
      {
        label: 'a',
        environment: 'production',
        scopes: ['api:read'],
        rate_limit: { limit: 20, burst: 40, window: 'hour' },
      },
      'production',
    );
    for (let i = 0; i < 16; i++) await (await fetch(`${t.url}/api/x`, { headers: bearer(a.secret) })).arrayBuffer();
    await t.stop();
    clock.advance(60_000);
    t = await startGateway(values, { clock, dir: t.dir, admin: t.admin });
    const b = await t.gw.keys.create(
      {
        label: 'b',
        environment: 'production',
        scopes: ['api:read'],
        rate_limit: { limit: 20, burst: 40, window: 'hour' },
        replaces: a.key.id,
      } as never,
      'production',
    );
    for (let i = 0; i < 4; i++) await (await fetch(`${t.url}/api/x`, { headers: bearer(b.secret) })).arrayBuffer();
    await t.gw.events.flush();
    const ev = await new EventTable(t.gw.store).list({ type: 'consumer.quota.warning' });
    expect(ev.map((e) => [e.data.key_id, e.data.threshold, e.data.used]).sort()).toEqual(
      [
        [a.key.id, 0.8, 16],
        [b.key.id, 0.95, 19],
      ].sort(),
    );
  });
});
