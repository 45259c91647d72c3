import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, startServer, type TestServer } from '../helpers/origin.js';

/** Issue #26: wrong results a user would act on (items 1, 2 and 4), through the real listener. */
describe('the first hour: results a user acts on', () => {
  let origin: TestServer;
  let t: TestGateway;
  const seen: { method: string; url: string; body: string; headers: Record<string, unknown> }[] = [];
  const api = (secret: string, method: string, path: string, body?: unknown) => call(t.url, secret, method, path, body);

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({
          method: req.method ?? '',
          url: req.url ?? '',
          body: Buffer.concat(chunks).toString(),
          headers: req.headers,
        });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    t = await startGateway({
      routes: [
        {
          name: 'api',
          prefix: '/api',
          scopes: { read: 'api:read', write: 'api:write' },
          origins: { production: origin.url },
        },
      ],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('1. GET /v2/api-keys shows the stored last_used_at after a restart, as GET /v2/api-keys/{id} does', async () => {
    const k = (
      await api(t.admin, 'POST', '/v2/api-keys', { label: 'used', environment: 'production', scopes: ['api:read'] })
    ).body;
    await (await fetch(`${t.url}/api/x`, { headers: bearer(k.secret) })).arrayBuffer();
    const dir = t.dir;
    const admin = t.admin;
    await t.stop();
    t = await startGateway(
      {
        routes: [
          {
            name: 'api',
            prefix: '/api',
            scopes: { read: 'api:read', write: 'api:write' },
            origins: { production: origin.url },
          },
        ],
      },
      { dir, admin },
    );
    const one = (await api(admin, 'GET', `/v2/api-keys/${k.id}`)).body;
    const list = (await api(admin, 'GET', '/v2/api-keys?label=used')).body;
    expect(one.last_used_at).not.toBeNull();
    expect(list.data[0].last_used_at).toBe(one.last_used_at);
  });

  it('2. a replay never sends a redaction marker as the value: refused naming the fields, sent with set', async () => {
    const buyer = (
      await api(t.admin, 'POST', '/v2/api-keys', {
        label: 'b',
        environment: 'production',
        scopes: ['api:read', 'api:write'],
      })
    ).body.secret as string;
    const post = await fetch(`${t.url}/api/pay`, {
      method: 'POST',
      headers: { ...bearer(buyer), 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 5, card: { card_number: '4111111111111111' } }),
    });
    const postId = post.headers.get('x-wake-id') as string;
    await post.arrayBuffer();
    const get = await fetch(`${t.url}/api/items?token=tok_live_1&page=2`, { headers: bearer(buyer) });
    const getId = get.headers.get('x-wake-id') as string;
    await get.arrayBuffer();
    await flushed(t.gw);
    const before = seen.length;
    const refused = await api(t.admin, 'POST', `/v2/wakes/${postId}/replay`, { allow_unsafe: true });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ type: 'conflict', param: 'set' });
    expect(refused.body.error.message).toContain('$.card.card_number');
    const q = await api(t.admin, 'POST', `/v2/wakes/${getId}/replay`, {});
    expect(q.status).toBe(409);
    expect(q.body.error.message).toContain('token');
    expect(seen.length).toBe(before);
    const wrong = await api(t.admin, 'POST', `/v2/wakes/${getId}/replay`, { set: { token: 'x', nope: 1 } });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error.param).toBe('set.nope');
    // Supplied: the origin gets the values given, not markers.
    expect(
      (
        await api(t.admin, 'POST', `/v2/wakes/${postId}/replay`, {
          allow_unsafe: true,
          set: { '$.card.card_number': '4000000000000002' },
        })
      ).status,
    ).toBe(202);
    expect((await api(t.admin, 'POST', `/v2/wakes/${getId}/replay`, { set: { token: 'tok_test_2' } })).status).toBe(
      202,
    );
    await expect.poll(() => seen.length, { timeout: 5000 }).toBe(before + 2);
    const sent = seen.slice(before);
    const p = sent.find((s) => s.method === 'POST');
    const g = sent.find((s) => s.method === 'GET');
    expect(JSON.parse(p?.body ?? '{}')).toEqual({ amount: 5, card: { card_number: '4000000000000002' } });
    expect(g?.url).toBe('/api/items?token=tok_test_2&page=2');
    for (const s of sent) expect(`${s.url}${s.body}`).not.toMatch(/redacted/);
  });

  it("6. the router's own refusals have the error body, after the key check; an unknown method is 405", async () => {
    const long = `/v2/webhooks/endpoints/we_${'a'.repeat(300)}`;
    const anon = await fetch(`${t.url}${long}`);
    expect(anon.status).toBe(401);
    expect(anon.headers.get('www-authenticate')).toBe('Bearer');
    expect(((await anon.json()) as { error: { type: string } }).error.type).toBe('authentication_required');
    for (const path of [long, '/v2/webhooks/endpoints/%E0%A4%A']) {
      const r = await api(t.admin, 'GET', path);
      expect(r.status, path).toBe(400);
      expect(r.body.error, path).toMatchObject({ type: 'invalid_request', param: 'path', retry_after: null });
      expect(r.body.error.wake_id, path).toMatch(/^wk_/);
    }
    for (const headers of [{}, { 'content-type': 'application/json' }] as Record<string, string>[]) {
      const q = await fetch(`${t.url}/v2/wakes`, {
        method: 'QUERY',
        headers: { ...bearer(t.admin), ...headers },
        body: '{}',
      });
      expect(q.status).toBe(405);
      expect(q.headers.get('allow')).toContain('GET');
      expect(((await q.json()) as { error: { type: string } }).error.type).toBe('invalid_request');
    }
  });

  it('4. impossible dates are refused, not shifted', async () => {
    const k = (
      await api(t.admin, 'POST', '/v2/api-keys', { label: 'd', environment: 'production', scopes: ['api:read'] })
    ).body;
    const r = await api(t.admin, 'DELETE', `/v2/api-keys/${k.id}`, { revoke_at: '2027-02-30T00:00:00Z' });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'revoke_at' });
    expect(r.body.error.message).toContain('not a real date');
    for (const q of [
      'since=2026-02-30T00:00Z',
      'until=2026-13-01T00:00Z',
      'since=2026-04-31T10:00:00Z',
      'since=2026-01-01T24:00Z',
    ]) {
      const w = await api(t.admin, 'GET', `/v2/wakes?${q}`);
      expect(w.status, q).toBe(400);
      expect(w.body.error.param, q).toBe(q.split('=')[0]);
    }
    expect((await api(t.admin, 'GET', '/v2/wakes?since=2028-02-29T00:00Z')).status).toBe(200);
    // Still scheduled for the day asked, nothing else.
    expect((await api(t.admin, 'GET', `/v2/api-keys/${k.id}`)).body.revoke_at).toBeNull();
  });
});

describe("the router's refusals pass admission", () => {
  it("draw from the caller's bucket like any call: past it, 429 before the path is looked at", async () => {
    const origin = await echoOrigin();
    // A bucket of 3 an hour: nothing refills within the test, whatever the host's speed.
    const t = await startGateway({
      rate_limits: { default: { limit: 3, burst: 3, window: 'hour' } },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    try {
      const long = `/v2/webhooks/endpoints/we_${'a'.repeat(300)}`;
      const seen: [number, string | null][] = [];
      for (let i = 0; i < 4; i++) {
        const r = await fetch(`${t.url}${long}`, { headers: bearer(t.admin) });
        await r.arrayBuffer();
        seen.push([r.status, r.headers.get('x-ratelimit-remaining')]);
      }
      expect(seen).toEqual([
        [400, '2'],
        [400, '1'],
        [400, '0'],
        [429, '0'],
      ]);
    } finally {
      await t.cleanup();
      await origin.close();
    }
  });
});
