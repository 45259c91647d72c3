import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

/** Replays bounded while they run; key revocation, rotation and 404s as DESIGN.md words them. */
describe('running replays are bounded; keys: idempotent revocation, rotation of active keys only, 404 params', () => {
  let origin: TestServer;
  let t: TestGateway;
  /** Replays the origin holds unanswered until released. */
  const held: ServerResponse[] = [];
  let holding = true;
  const release = () => {
    for (const res of held.splice(0)) res.end('{"ok":true}');
  };

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        if (req.headers['x-wakegate-replay-of'] && holding) held.push(res);
        else res.end('{"ok":true}');
      });
    });
    t = await startGateway({
      routes: [
        {
          name: 'api',
          prefix: '/api',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url },
        },
      ],
    });
  });
  afterAll(async () => {
    holding = false;
    release();
    await t.cleanup();
    await origin.close();
  });

  const api = (method: string, path: string, body?: unknown, secret = t.admin) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(secret), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  const newKey = async (label: string, scopes = ['wakes:write', 'wakes:read', 'payments:read']) => {
    const r = await api('POST', '/v2/api-keys', { label, environment: 'production', scopes });
    expect(r.status).toBe(201);
    return (await r.json()) as { id: string; secret: string };
  };

  it('a caller key runs at most 8 replays at once and the process 64: past either, 429 with Retry-After and the error body', async () => {
    const app = await newKey('app', ['payments:read']);
    const sent = await fetch(`${t.url}/api/items/1`, { headers: bearer(app.secret) });
    expect(sent.status).toBe(200);
    await sent.arrayBuffer();
    const wakeId = sent.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const replay = (secret: string) => api('POST', `/v2/wakes/${wakeId}/replay`, {}, secret);
    const callers = await Promise.all(Array.from({ length: 9 }, (_, i) => newKey(`replayer-${i}`)));
    const [first] = callers;
    if (!first) throw new Error('no caller');

    // One key: 8 replays run (the origin holds them), the 9th is refused.
    for (let i = 0; i < 8; i++) expect((await replay(first.secret)).status).toBe(202);
    await until(() => held.length === 8, 10_000);
    const over = await replay(first.secret);
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const body = await over.json();
    expect(body.error).toMatchObject({ type: 'rate_limit_exceeded', param: null });
    expect(body.error.retry_after).toBe(Number(over.headers.get('retry-after')));
    expect(body.error.message).toMatch(/8 replays/);
    expect(body.error.wake_id).toMatch(/^wk_/);

    // The process: 8 keys of 8 fill its 64; a 9th key, under its own share, is refused all the same.
    for (const c of callers.slice(1, 8)) for (let i = 0; i < 8; i++) expect((await replay(c.secret)).status).toBe(202);
    await until(() => held.length === 64, 15_000);
    const last = callers[8];
    if (!last) throw new Error('no caller');
    const full = await replay(last.secret);
    expect(full.status).toBe(429);
    expect(full.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect((await full.json()).error).toMatchObject({
      type: 'rate_limit_exceeded',
      message: expect.stringMatching(/64 replays/),
    });

    // Answered, they free their places: the same keys replay again.
    release();
    await until(async () => (await replay(last.secret)).status === 202, 10_000);
    await until(async () => (await replay(first.secret)).status === 202, 10_000);
    holding = false;
    release();
  }, 60_000);

  it('DELETE of a key already revoked returns it unchanged, whatever revoke_at says (past included)', async () => {
    const k = await newKey('to-revoke', ['wakes:read']);
    const now = await api('DELETE', `/v2/api-keys/${k.id}`);
    expect(now.status).toBe(200);
    const revoked = await now.json();
    expect(revoked.revoked_at).not.toBeNull();
    const past = new Date(Date.now() - 60_000).toISOString();
    const again = await api('DELETE', `/v2/api-keys/${k.id}`, { revoke_at: past });
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({
      id: k.id,
      revoked_at: revoked.revoked_at,
      revoke_at: revoked.revoke_at,
    });
    // An active key still refuses a past revoke_at.
    const active = await newKey('active', ['wakes:read']);
    const bad = await api('DELETE', `/v2/api-keys/${active.id}`, { revoke_at: past });
    expect(bad.status).toBe(422);
    expect((await bad.json()).error.param).toBe('revoke_at');
  });

  it('a key whose revocation is scheduled is not active: it cannot be replaced (409 conflict naming replaces)', async () => {
    const k = await newKey('scheduled', ['wakes:read']);
    const at = new Date(Date.now() + 3_600_000).toISOString();
    expect((await api('DELETE', `/v2/api-keys/${k.id}`, { revoke_at: at })).status).toBe(200);
    const r = await api('POST', '/v2/api-keys', {
      label: 'successor',
      environment: 'production',
      scopes: ['wakes:read'],
      replaces: k.id,
    });
    expect(r.status).toBe(409);
    const e = (await r.json()).error;
    expect(e).toMatchObject({ type: 'conflict', param: 'replaces' });
    expect(e.message).toMatch(/scheduled/);
    const listed = await (await api('GET', '/v2/api-keys?label=successor')).json();
    expect(listed.data).toEqual([]);
  });

  it('a 404 by id names its path parameter: key_id, as wake_id, endpoint_id and delivery_id do', async () => {
    const cases: [string, string, string][] = [
      ['GET', '/v2/api-keys/key_nope', 'key_id'],
      ['DELETE', '/v2/api-keys/key_nope', 'key_id'],
      ['DELETE', '/v2/api-keys/nope', 'key_id'],
      ['PATCH', '/v2/api-keys/nope', 'key_id'],
      ['PATCH', '/v2/api-keys/key_nope', 'key_id'],
      ['GET', '/v2/wakes/wk_nope', 'wake_id'],
      ['GET', '/v2/webhooks/endpoints/we_nope', 'endpoint_id'],
      ['DELETE', '/v2/webhooks/endpoints/we_nope', 'endpoint_id'],
      ['GET', '/v2/webhooks/deliveries/dlv_nope', 'delivery_id'],
      ['POST', '/v2/webhooks/deliveries/dlv_nope/replay', 'delivery_id'],
    ];
    for (const [method, path, param] of cases) {
      const r = await api(method, path, method === 'PATCH' ? { tls_fingerprint: null } : undefined);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect((await r.json()).error, `${method} ${path}`).toMatchObject({ type: 'resource_missing', param });
    }
  });
});
