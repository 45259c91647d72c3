import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { EventTable } from '../../src/store/events.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

describe('/v2/api-keys', () => {
  let origin: TestServer;
  let t: TestGateway;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));
  const api = (method: string, path: string, body?: unknown, secret = t.admin, raw?: string) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: {
        ...bearer(secret),
        ...(body !== undefined || raw !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    });
  const create = async (body: Record<string, unknown>, secret = t.admin) => {
    const r = await api('POST', '/v2/api-keys', body, secret);
    expect(r.status, JSON.stringify(body)).toBe(201);
    return r.json();
  };
  const events = async (type: string) => {
    await t.gw.events.flush();
    return new EventTable(t.gw.store).list({ type });
  };

  beforeAll(async () => {
    origin = await echoOrigin('prod');
    t = await startGateway(
      {
        routes: [
          {
            name: 'payments',
            prefix: '/v2/payments',
            scopes: { read: 'payments:read', write: 'payments:write' },
            origins: { production: origin.url, sandbox: origin.url },
          },
        ],
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('issues a key with its secret once, stores only a hash, and reads it back without the secret', async () => {
    const k = await create({
      label: 'billing job',
      environment: 'production',
      scopes: ['payments:read', 'wakes:read'],
    });
    expect(k).toMatchObject({
      object: 'api_key',
      label: 'billing job',
      consumer: 'billing job',
      environment: 'production',
      scopes: ['payments:read', 'wakes:read'],
      rate_limit: null,
      replaces: null,
      revoke_at: null,
      revoked_at: null,
      last_used_at: null,
      created_at: new Date(clock.now()).toISOString(),
    });
    expect(k.id).toMatch(/^key_[0-9A-Za-z]{20}$/);
    expect(k.secret).toMatch(/^svc_live_[0-9A-Za-z]{43}$/);
    const g = await api('GET', `/v2/api-keys/${k.id}`);
    expect(g.status).toBe(200);
    const got = await g.json();
    expect(got.secret).toBeUndefined();
    expect(got.id).toBe(k.id);
    const rs = await t.gw.store.client.query({
      query: `SELECT * FROM ${t.gw.store.db}.api_keys`,
      format: 'JSONEachRow',
    });
    const stored = JSON.stringify(await rs.json());
    expect(stored).not.toContain(k.secret.slice(9));
    expect(stored).toContain(k.id);
  });

  it('takes consumer and rate_limit, and issues svc_test_ secrets for test-class environments', async () => {
    const k = await create({
      label: 'x',
      environment: 'production',
      scopes: ['wakes:read'],
      consumer: 'acme',
      rate_limit: { limit: 60, burst: 10, window: 'minute' },
    });
    expect(k).toMatchObject({ consumer: 'acme', rate_limit: { limit: 60, burst: 10, window: 'minute' } });
    const { key, secret } = await t.gw.keys.create(
      { label: 's', environment: 'sandbox', scopes: ['wakes:read'] },
      'sandbox',
    );
    expect(secret).toMatch(/^svc_test_/);
    expect(key.environment).toBe('sandbox');
  });

  it('answers 400 for malformed bodies and 422 for unacceptable values, naming param', async () => {
    const good = { label: 'l', environment: 'production', scopes: ['wakes:read'] };
    const cases: [unknown, number, string, string?][] = [
      [undefined, 400, 'body', '{"label":'],
      [{ ...good, extra: 1 }, 400, 'extra'],
      [{ ...good, label: 5 }, 400, 'label'],
      [{ ...good, scopes: 'wakes:read' }, 400, 'scopes'],
      [{ label: 'l', environment: 'production' }, 400, 'scopes'],
      [{ ...good, rate_limit: { limit: 'x', burst: 1, window: 'minute' } }, 400, 'rate_limit'],
      [{ ...good, rate_limit: 'nosuchpolicy' }, 422, 'rate_limit'],
      [{ ...good, environment: 'nowhere' }, 422, 'environment'],
      [{ ...good, scopes: ['wakes:read', 'bogus:scope'] }, 422, 'scopes[1]'],
      [{ ...good, scopes: ['*'] }, 422, 'scopes[0]'],
      [{ ...good, scopes: ['wakes:read', 'wakes:read'] }, 422, 'scopes[1]'],
      [{ ...good, scopes: [] }, 422, 'scopes'],
      [{ ...good, replaces: 'key_doesnotexist' }, 404, 'replaces'],
    ];
    for (const [body, status, param, raw] of cases) {
      const r = await api('POST', '/v2/api-keys', body, t.admin, raw);
      const b = await r.json();
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(b.error.param, JSON.stringify(body)).toBe(param);
      expect(b.error.wake_id).toBe(r.headers.get('x-wake-id'));
    }
    const ct = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'text/plain' },
      body: 'x',
    });
    expect(ct.status).toBe(400);
    expect((await ct.json()).error.type).toBe('invalid_request');
  });

  it('needs the right scope for every endpoint, naming it', async () => {
    const reader = await create({ label: 'reader', environment: 'production', scopes: ['wakes:read'] });
    const calls: [string, string, string, unknown?][] = [
      ['POST', '/v2/api-keys', 'keys:write', { label: 'a', environment: 'production', scopes: ['wakes:read'] }],
      ['GET', `/v2/api-keys/${reader.id}`, 'keys:read'],
      ['DELETE', `/v2/api-keys/${reader.id}`, 'keys:write'],
    ];
    for (const [method, path, scope, body] of calls) {
      const r = await api(method, path, body, reader.secret);
      expect(r.status, `${method} ${path}`).toBe(403);
      const e = (await r.json()).error;
      expect(e.type).toBe('insufficient_scope');
      expect(e.message).toContain(scope);
    }
    const writer = await create({ label: 'writer', environment: 'production', scopes: ['keys:write'] });
    // keys:write does not include keys:read: no inheritance.
    expect((await api('GET', `/v2/api-keys/${reader.id}`, undefined, writer.secret)).status).toBe(403);
    expect((await api('GET', '/v2/wakes', undefined, writer.secret)).status).toBe(403);
  });

  it('revokes at once: the very next request is refused, a second DELETE changes nothing, key.revoked is raised', async () => {
    const k = await create({ label: 'leaky', environment: 'production', scopes: ['payments:read', 'wakes:read'] });
    expect((await fetch(`${t.url}/v2/payments/p1`, { headers: bearer(k.secret) })).status).toBe(200);
    const d = await api('DELETE', `/v2/api-keys/${k.id}`);
    expect(d.status).toBe(200);
    const revoked = await d.json();
    expect(revoked.revoked_at).toBe(new Date(clock.now()).toISOString());
    const r = await fetch(`${t.url}/v2/payments/p1`, { headers: bearer(k.secret) });
    expect(r.status).toBe(401);
    expect((await r.json()).error.type).toBe('key_revoked');
    expect((await fetch(`${t.url}/v2/wakes`, { headers: bearer(k.secret) })).status).toBe(401);
    clock.advance(1000);
    const again = await api('DELETE', `/v2/api-keys/${k.id}`);
    expect(again.status).toBe(200);
    expect((await again.json()).revoked_at).toBe(revoked.revoked_at);
    const ev = (await events('key.revoked')).filter((e) => (e.data.key as { id: string }).id === k.id);
    expect(ev).toHaveLength(1);
    expect(ev[0]?.data.scheduled).toBe(false);
    // The refused request is a wake of that key, for the leak review.
    await flushed(t.gw);
    const review = await (await api('GET', `/v2/wakes?key_id=${k.id}`)).json();
    expect(review.data.map((w: { status: number }) => w.status).sort()).toEqual([200, 401, 401]);
  });

  it('revokes on schedule exactly at revoke_at, whatever the poll, and raises key.revoked then', async () => {
    const k = await create({ label: 'old', environment: 'production', scopes: ['payments:read'] });
    const at = clock.now() + 60_000;
    const past = await api('DELETE', `/v2/api-keys/${k.id}`, { revoke_at: new Date(clock.now() - 1).toISOString() });
    expect(past.status).toBe(422);
    expect((await past.json()).error.param).toBe('revoke_at');
    const bad = await api('DELETE', `/v2/api-keys/${k.id}`, { revoke_at: 'tomorrow' });
    expect(bad.status).toBe(400);
    const d = await api('DELETE', `/v2/api-keys/${k.id}`, { revoke_at: new Date(at).toISOString() });
    expect(d.status).toBe(200);
    expect((await d.json()).revoke_at).toBe(new Date(at).toISOString());
    clock.set(at - 1);
    expect((await fetch(`${t.url}/v2/payments/x`, { headers: bearer(k.secret) })).status).toBe(200);
    t.gw.keys.sweepScheduled();
    expect((await events('key.revoked')).filter((e) => (e.data.key as { id: string }).id === k.id)).toHaveLength(0);
    clock.set(at);
    const r = await fetch(`${t.url}/v2/payments/x`, { headers: bearer(k.secret) });
    expect(r.status).toBe(401);
    expect((await r.json()).error.type).toBe('key_revoked');
    t.gw.keys.sweepScheduled();
    t.gw.keys.sweepScheduled();
    const ev = (await events('key.revoked')).filter((e) => (e.data.key as { id: string }).id === k.id);
    expect(ev).toHaveLength(1);
    expect(ev[0]).toMatchObject({ created_at: at, data: { scheduled: true } });
    const g = await (await api('GET', `/v2/api-keys/${k.id}`)).json();
    expect(g.revoked_at).toBe(new Date(at).toISOString());
  });

  it('follows SPEC.md rotation: replacement, old key idle by last_used_at, scheduled revoke, activity review', async () => {
    const old = await create({
      label: 'deploy',
      environment: 'production',
      scopes: ['payments:read', 'payments:write'],
    });
    clock.advance(1234);
    await fetch(`${t.url}/v2/payments/a`, { headers: bearer(old.secret) });
    const used = await (await api('GET', `/v2/api-keys/${old.id}`)).json();
    expect(used.last_used_at).toBe(new Date(clock.now() - (clock.now() % 1000)).toISOString());
    const repl = await create({ label: 'deploy v2', environment: 'production', scopes: old.scopes, replaces: old.id });
    expect(repl.replaces).toBe(old.id);
    const rot = (await events('key.rotated')).find((e) => (e.data.key as { id: string }).id === repl.id);
    expect(rot?.data.replaces).toMatchObject({ id: old.id });
    expect(JSON.stringify(rot)).not.toContain(repl.secret.slice(9));
    clock.advance(10_000);
    await fetch(`${t.url}/v2/payments/b`, { headers: bearer(repl.secret) });
    const idle = await (await api('GET', `/v2/api-keys/${old.id}`)).json();
    expect(idle.last_used_at).toBe(used.last_used_at);
    const at = clock.now() + 3_600_000;
    expect((await api('DELETE', `/v2/api-keys/${old.id}`, { revoke_at: new Date(at).toISOString() })).status).toBe(200);
    expect((await fetch(`${t.url}/v2/payments/c`, { headers: bearer(old.secret) })).status).toBe(200);
    clock.set(at);
    expect((await fetch(`${t.url}/v2/payments/c`, { headers: bearer(old.secret) })).status).toBe(401);
    expect((await fetch(`${t.url}/v2/payments/c`, { headers: bearer(repl.secret) })).status).toBe(200);
    await flushed(t.gw);
    const activity = await (await api('GET', `/v2/wakes?key_id=${old.id}`)).json();
    expect(activity.data.map((w: { path: string }) => w.path).sort()).toEqual([
      '/v2/payments/a',
      '/v2/payments/c',
      '/v2/payments/c',
    ]);
  });

  it('keeps environments apart: ids of another environment are 404', async () => {
    const prodKey = await create({ label: 'p', environment: 'production', scopes: ['wakes:read'] });
    const { secret: sandboxAdmin } = await t.gw.keys.create(
      { label: 'sandbox admin', environment: 'sandbox', scopes: ['keys:read', 'keys:write', 'wakes:read'] },
      'sandbox',
    );
    const r = await api('GET', `/v2/api-keys/${prodKey.id}`, undefined, sandboxAdmin);
    expect(r.status).toBe(404);
    expect((await r.json()).error.type).toBe('resource_missing');
    expect((await api('DELETE', `/v2/api-keys/${prodKey.id}`, undefined, sandboxAdmin)).status).toBe(404);
    const prodWake = (await fetch(`${t.url}/v2/payments/z`, { headers: bearer(t.admin) })).headers.get('x-wake-id');
    await flushed(t.gw);
    expect((await api('GET', `/v2/wakes/${prodWake}`)).status).toBe(200);
    expect((await api('GET', `/v2/wakes/${prodWake}`, undefined, sandboxAdmin)).status).toBe(404);
    const list = await (await api('GET', '/v2/wakes?limit=100', undefined, sandboxAdmin)).json();
    expect(list.data.every((w: { environment: string }) => w.environment === 'sandbox')).toBe(true);
    expect((await api('GET', '/v2/wakes?environment=production', undefined, sandboxAdmin)).status).toBe(404);
  });

  it('publishes an OpenAPI 3.1 document of every route, without a key, that validates', async () => {
    const r = await fetch(`${t.url}/v2/openapi.json`);
    expect(r.status).toBe(200);
    const doc = await r.json();
    expect(doc.openapi).toBe('3.1.0');
    const ops = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([p, m]) =>
      Object.keys(m).map((k) => `${k.toUpperCase()} ${p}`),
    );
    for (const op of [
      'GET /v2/wakes',
      'GET /v2/wakes/{wake_id}',
      'POST /v2/api-keys',
      'GET /v2/api-keys/{key_id}',
      'DELETE /v2/api-keys/{key_id}',
    ]) {
      expect(ops).toContain(op);
    }
    const limit = doc.paths['/v2/wakes'].get.parameters.find((p: { name: string }) => p.name === 'limit');
    expect(limit).toMatchObject({ in: 'query', required: false });
    expect(doc.paths['/v2/api-keys'].post.requestBody.content['application/json'].schema.required).toEqual([
      'label',
      'environment',
      'scopes',
    ]);
    const { Validator } = await import('@seriousme/openapi-schema-validator');
    const res = await new Validator().validate(doc);
    expect(res.errors ?? []).toEqual([]);
    expect(res.valid).toBe(true);
  });
});
