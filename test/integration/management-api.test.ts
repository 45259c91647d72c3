import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { Webhook as SvixWebhook } from 'svix';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySignature } from '../../src/verify.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

describe('the management API operators need (one admin key for every environment)', () => {
  let origin: TestServer;
  let receiver: Receiver;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      res.statusCode = req.url?.includes('fail') ? 503 : 200;
      res.end('{}');
    });
    receiver = await startReceiver();
    t = await startGateway({
      routes: [
        {
          name: 'pay',
          prefix: '/pay',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url, sandbox: origin.url },
        },
      ],
      webhooks: { allow_insecure_http: true, allow_private_networks: true, retry_schedule_s: [3600] },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
    await receiver.close();
  });

  const api = (method: string, path: string, body?: unknown, key = t.admin) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(key), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });

  it('a production admin key creates, reads, lists and revokes sandbox keys; a sandbox key never sees production', async () => {
    const r = await api('POST', '/v2/api-keys', { label: 'sb', environment: 'sandbox', scopes: ['payments:read'] });
    expect(r.status).toBe(201);
    const k = await r.json();
    expect(k.secret).toMatch(/^svc_test_/);
    expect((await api('GET', `/v2/api-keys/${k.id}`)).status).toBe(404);
    expect((await api('GET', `/v2/api-keys/${k.id}?environment=sandbox`)).status).toBe(200);
    const list = await (await api('GET', '/v2/api-keys?environment=sandbox&label=sb')).json();
    expect(list.data.map((x: { id: string }) => x.id)).toEqual([k.id]);
    expect(list.data[0].status).toBe('active');
    const del = await api('DELETE', `/v2/api-keys/${k.id}?environment=sandbox`);
    expect((await del.json()).revoked_at).not.toBeNull();
    const revoked = await (await api('GET', '/v2/api-keys?environment=sandbox&status=revoked')).json();
    expect(revoked.data.map((x: { id: string }) => x.id)).toContain(k.id);
    expect((await api('GET', '/v2/api-keys?status=bogus')).status).toBe(400);

    const sbAdmin = (
      await t.gw.keys.create({ label: 'sba', environment: 'sandbox', scopes: ['keys:read', 'keys:write'] }, 'sandbox')
    ).secret;
    expect((await api('GET', '/v2/api-keys?environment=production', undefined, sbAdmin)).status).toBe(404);
    const make = await api(
      'POST',
      '/v2/api-keys',
      { label: 'x', environment: 'production', scopes: ['keys:read'] },
      sbAdmin,
    );
    expect(make.status).toBe(404);
  });

  it('rotation carries the consumer over, refuses a revoked key and a second replacement; rate_limit takes a policy name', async () => {
    const old = await (
      await api('POST', '/v2/api-keys', {
        label: 'job',
        consumer: 'acme',
        environment: 'production',
        scopes: ['payments:read'],
        rate_limit: 'reports',
      })
    ).json();
    expect(old.rate_limit).toEqual({ limit: 600, burst: 600, window: 'minute' });
    const next = await api('POST', '/v2/api-keys', {
      label: 'job v2',
      environment: 'production',
      scopes: ['payments:read'],
      replaces: old.id,
    });
    expect(next.status).toBe(201);
    expect((await next.json()).consumer).toBe('acme');
    const twice = await api('POST', '/v2/api-keys', {
      label: 'job v3',
      environment: 'production',
      scopes: ['payments:read'],
      replaces: old.id,
    });
    expect(twice.status).toBe(409);
    const gone = await (
      await api('POST', '/v2/api-keys', { label: 'g', environment: 'production', scopes: ['payments:read'] })
    ).json();
    await api('DELETE', `/v2/api-keys/${gone.id}`);
    const onRevoked = await api('POST', '/v2/api-keys', {
      label: 'g2',
      environment: 'production',
      scopes: ['payments:read'],
      replaces: gone.id,
    });
    expect(onRevoked.status).toBe(409);
    expect((await onRevoked.json()).error.param).toBe('replaces');
  });

  it('endpoints: sandbox ones through the admin key; get, disable, re-enable, rotate the secret, test, delete', async () => {
    const created = await api('POST', '/v2/webhooks/endpoints', {
      url: receiver.url,
      events: ['*'],
      environment: 'sandbox',
    });
    expect(created.status).toBe(201);
    const ep = await created.json();
    expect(ep.environment).toBe('sandbox');
    expect((await api('GET', `/v2/webhooks/endpoints/${ep.id}`)).status).toBe(404);
    const q = '?environment=sandbox';
    expect((await (await api('GET', `/v2/webhooks/endpoints/${ep.id}${q}`)).json()).status).toBe('enabled');
    const off = await (await api('PATCH', `/v2/webhooks/endpoints/${ep.id}${q}`, { status: 'disabled' })).json();
    expect(off.status).toBe('disabled');
    const on = await (
      await api('PATCH', `/v2/webhooks/endpoints/${ep.id}${q}`, { status: 'enabled', events: ['key.revoked'] })
    ).json();
    expect(on).toMatchObject({ status: 'enabled', events: ['key.revoked'], disabled_at: null });
    expect((await api('PATCH', `/v2/webhooks/endpoints/${ep.id}${q}`, { status: 'paused' })).status).toBe(400);

    const rot = await (await api('POST', `/v2/webhooks/endpoints/${ep.id}/rotate-secret${q}`)).json();
    expect(rot.secret).not.toBe(ep.secret);
    expect(Date.parse(rot.previous_secret_expires_at) - Date.now()).toBeGreaterThan(23 * 3_600_000);

    const sent = await api('POST', `/v2/webhooks/endpoints/${ep.id}/test${q}`);
    expect(sent.status).toBe(201);
    const dlv = await sent.json();
    expect(dlv.event_type).toBe('webhook.test');
    await until(() => receiver.got.some((g) => g.headers['x-service-event-type'] === 'webhook.test'));
    const got = receiver.got.find((g) => g.headers['x-service-event-type'] === 'webhook.test');
    const raw = got?.body as string;
    const h = got?.headers as Record<string, string>;
    // Both secrets sign during the overlap: receivers on the old one and the new one accept it.
    expect(verifySignature(raw, h['x-service-signature'], ep.secret)).toBe(true);
    expect(verifySignature(raw, h['x-service-signature'], rot.secret)).toBe(true);
    // Standard Webhooks, with the real libraries, unchanged.
    const swh: Record<string, string> = {
      'webhook-id': h['webhook-id'] as string,
      'webhook-timestamp': h['webhook-timestamp'] as string,
      'webhook-signature': h['webhook-signature'] as string,
    };
    expect(new StandardWebhook(rot.secret).verify(raw, swh)).toMatchObject({ type: 'webhook.test' });
    expect(new SvixWebhook(rot.secret).verify(raw, swh)).toMatchObject({ type: 'webhook.test' });
    expect(new SvixWebhook(ep.secret).verify(raw, swh)).toMatchObject({ type: 'webhook.test' });
    // Stripe's constructEvent accepts x-service-signature as its own scheme.
    const stripe = new Stripe('sk_test_unused');
    expect(stripe.webhooks.constructEvent(raw, h['x-service-signature'] as string, rot.secret).type).toBe(
      'webhook.test',
    );
    expect(() => new SvixWebhook(rot.secret).verify(`${raw} `, swh)).toThrow();

    await until(async () => {
      const d = await (await api('GET', `/v2/webhooks/deliveries/${dlv.id}${q}`)).json();
      return d.status === 'delivered' && d.attempts.length === 1;
    });
    const d = await (await api('GET', `/v2/webhooks/deliveries/${dlv.id}${q}`)).json();
    expect(d.attempts[0]).toMatchObject({ attempt: 1, response_status: 200, error: null, response_body: 'ok' });

    const del = await api('DELETE', `/v2/webhooks/endpoints/${ep.id}${q}`);
    expect((await del.json()).status).toBe('deleted');
    expect((await api('GET', `/v2/webhooks/endpoints/${ep.id}${q}`)).status).toBe(404);
    const list = await (await api('GET', `/v2/webhooks/endpoints${q}`)).json();
    expect(list.data.map((e: { id: string }) => e.id)).not.toContain(ep.id);
  });

  it('keeps every attempt of a failing delivery; deleting its endpoint cancels what is pending', async () => {
    receiver.answer = (_req, res) => {
      res.statusCode = 500;
      res.end('down');
    };
    const ep = await (await api('POST', '/v2/webhooks/endpoints', { url: receiver.url, events: ['*'] })).json();
    const dlv = await (await api('POST', `/v2/webhooks/endpoints/${ep.id}/test`)).json();
    await until(
      async () => (await (await api('GET', `/v2/webhooks/deliveries/${dlv.id}`)).json()).attempts?.length === 1,
    );
    const d = await (await api('GET', `/v2/webhooks/deliveries/${dlv.id}`)).json();
    expect(d).toMatchObject({ status: 'failed', attempt: 1 });
    expect(d.attempts[0]).toMatchObject({ response_status: 500, response_body: 'down' });
    await api('DELETE', `/v2/webhooks/endpoints/${ep.id}`);
    await t.gw.dispatcher.flushWrites();
    const after = await (await api('GET', `/v2/webhooks/deliveries/${dlv.id}`)).json();
    expect(after.status).toBe('dead_lettered');
    expect(after.response_body).toBe('endpoint deleted');
    receiver.answer = (_req, res) => res.end('ok');
  });

  it('stats per route and minute; wake filters since, until, method, route', async () => {
    const k = (
      await t.gw.keys.create(
        { label: 's', environment: 'production', scopes: ['payments:read', 'payments:write'] },
        'production',
      )
    ).secret;
    const t0 = new Date().toISOString();
    for (let i = 0; i < 10; i++) await fetch(`${t.url}/pay/ok`, { headers: bearer(k) });
    for (let i = 0; i < 3; i++) await fetch(`${t.url}/pay/fail`, { method: 'POST', headers: bearer(k) });
    await flushed(t.gw);
    const st = await (await api('GET', '/v2/stats?route=pay')).json();
    const pay = st.routes.find((r: { route: string }) => r.route === 'pay');
    const sum = (f: string) => pay.points.reduce((a: number, p: Record<string, number>) => a + (p[f] as number), 0);
    expect(sum('requests')).toBe(13);
    expect(sum('errors')).toBe(3);
    expect(pay.points[0]).toHaveProperty('p95_ms');
    expect((await api('GET', '/v2/stats?since=2026-01-01T00:00:00Z&until=2025-01-01T00:00:00Z')).status).toBe(400);
    const posts = await (await api('GET', `/v2/wakes?route=pay&method=post&since=${t0}`)).json();
    expect(posts.data).toHaveLength(3);
    const none = await (await api('GET', `/v2/wakes?route=pay&until=${t0}`)).json();
    expect(none.data).toHaveLength(0);
  });

  it('answers a wrong method with 405 and Allow, an unknown enum value with 400, and documents it all', async () => {
    const r = await api('PUT', '/v2/api-keys');
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toContain('POST');
    expect(r.headers.get('allow')).toContain('GET');
    expect((await r.json()).error.type).toBe('invalid_request');
    const e = await api('GET', '/v2/webhooks/deliveries?event_type=payment.made');
    expect(e.status).toBe(400);
    expect((await e.json()).error.param).toBe('event_type');
    const doc = await (await fetch(`${t.url}/v2/openapi.json`)).json();
    for (const p of [
      '/v2/api-keys',
      '/v2/stats',
      '/v2/webhooks/endpoints/{endpoint_id}',
      '/v2/webhooks/endpoints/{endpoint_id}/rotate-secret',
      '/v2/webhooks/endpoints/{endpoint_id}/test',
      '/v2/webhooks/deliveries/{delivery_id}',
    ]) {
      expect(doc.paths, p).toHaveProperty([p]);
    }
    expect(doc.paths['/v2/webhooks/endpoints/{endpoint_id}']).toHaveProperty('patch');
  });
});

describe('docs/api.md', () => {
  it('is the OpenAPI document of this build, rendered (npm run docs)', async () => {
    const { render, formatted, fetchOpenApi } = await import('../../scripts/api-docs.mjs');
    const { readFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const want = formatted(render(await fetchOpenApi()));
    const have = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'api.md'), 'utf8');
    expect(have, 'docs/api.md is stale: run npm run docs').toBe(want);
  }, 60_000);
});
