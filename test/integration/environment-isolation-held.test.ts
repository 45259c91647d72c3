// Regression tests from a review of isolation between environments and scopes (2026-11-27): attacks that held.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

/** Attacks from a sandbox key (and a narrow production key) on production that held. */
describe('environment isolation across /v2 (held)', () => {
  let prodO: TestServer;
  let sbO: TestServer;
  let rxP: Receiver;
  let rxS: Receiver;
  let t: TestGateway;
  const hits: string[] = [];
  const call = async (secret: string, method: string, path: string, body?: unknown) => {
    const r = await fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(secret), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    // biome-ignore lint/suspicious/noExplicitAny: read loosely
    let b: any = null;
    try {
      b = JSON.parse(text);
    } catch {}
    return { status: r.status, body: b };
  };
  /** An error without its wake id: what tells one refusal from another. */
  const err = (r: { status: number; body: { error?: { type: string; message: string; param: string | null } } }) => ({
    status: r.status,
    type: r.body?.error?.type,
    message: r.body?.error?.message,
    param: r.body?.error?.param,
  });

  beforeAll(async () => {
    const mk = (tag: string) =>
      startServer((req, res) => {
        hits.push(`${tag} ${req.headers['x-wakegate-environment']}`);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"a":1}');
      });
    prodO = await mk('PROD');
    sbO = await mk('SB');
    rxP = await startReceiver();
    rxS = await startReceiver();
    t = await startGateway({
      routes: [
        {
          name: 'payments',
          prefix: '/v2/payments',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: prodO.url, sandbox: sbO.url },
        },
      ],
      webhooks: { allow_insecure_http: true, allow_private_networks: true },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await prodO.close();
    await sbO.close();
    await rxP.close();
    await rxS.close();
  });

  it("a sandbox key holding every scope learns nothing of production's ids: each answer equals the one for an unknown id", async () => {
    const all = ['wakes:read', 'wakes:write', 'keys:read', 'keys:write', 'webhooks:read', 'webhooks:write'];
    const sb = (
      await call(t.admin, 'POST', '/v2/api-keys', {
        label: 'sb',
        environment: 'sandbox',
        scopes: [...all, 'payments:read'],
      })
    ).body;
    const prodKey = (
      await call(t.admin, 'POST', '/v2/api-keys', { label: 'p', environment: 'production', scopes: ['payments:read'] })
    ).body;
    const p = await fetch(`${t.url}/v2/payments/1`, { headers: bearer(t.admin) });
    await p.text();
    const wake = p.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const ep = (await call(t.admin, 'POST', '/v2/webhooks/endpoints', { url: rxP.url, events: ['key.rotated'] })).body;
    const dl = (await call(t.admin, 'POST', `/v2/webhooks/endpoints/${ep.id}/test`)).body;
    // Same shapes, never issued: the unknown ids.
    const ghost = {
      wake: `${wake.slice(0, -4)}zzzz`,
      key: 'key_zzzzzzzzzzzzzzzzzzzz',
      ep: 'we_zzzzzzzzzzzzzzzzzzzz',
      dl: `${dl.id.slice(0, -4)}zzzz`,
    };
    const attempts = (id: { wake: string; key: string; ep: string; dl: string }) =>
      [
        ['GET', `/v2/wakes/${id.wake}`],
        ['POST', `/v2/wakes/${id.wake}/replay`, {}],
        ['GET', `/v2/api-keys/${id.key}`],
        ['PATCH', `/v2/api-keys/${id.key}`, { tls_fingerprint: null }],
        ['DELETE', `/v2/api-keys/${id.key}`],
        ['POST', '/v2/api-keys', { label: 'r', environment: 'sandbox', scopes: ['wakes:read'], replaces: id.key }],
        ['GET', `/v2/webhooks/endpoints/${id.ep}`],
        ['PATCH', `/v2/webhooks/endpoints/${id.ep}`, { status: 'disabled' }],
        ['POST', `/v2/webhooks/endpoints/${id.ep}/rotate-secret`],
        ['POST', `/v2/webhooks/endpoints/${id.ep}/test`],
        ['DELETE', `/v2/webhooks/endpoints/${id.ep}`],
        ['GET', `/v2/webhooks/deliveries?endpoint_id=${id.ep}`],
        ['GET', `/v2/webhooks/deliveries/${id.dl}`],
        ['POST', `/v2/webhooks/deliveries/${id.dl}/replay`],
      ] as const;
    const real = { wake, key: prodKey.id, ep: ep.id, dl: dl.id };
    const a = attempts(real);
    const b = attempts(ghost);
    for (let i = 0; i < a.length; i++) {
      const [m, path, body] = a[i] as readonly [string, string, unknown?];
      const [m2, path2, body2] = b[i] as readonly [string, string, unknown?];
      const r1 = err(await call(sb.secret, m, path, body));
      const r2 = err(await call(sb.secret, m2, path2, body2));
      expect(r1.status, `${m} ${path}`).toBe(404);
      expect(r1, `${m} ${path}`).toEqual(r2);
    }
    // Nothing changed in production.
    expect((await call(t.admin, 'GET', `/v2/webhooks/endpoints/${ep.id}`)).body.status).toBe('enabled');
    expect((await call(t.admin, 'GET', `/v2/api-keys/${prodKey.id}`)).body.revoked_at).toBeNull();
    // Filters naming production ids find nothing; a production cursor is refused.
    expect((await call(sb.secret, 'GET', `/v2/wakes?key_id=${prodKey.id}`)).body.data).toEqual([]);
    await call(t.admin, 'GET', '/v2/payments/2');
    const page = (await call(t.admin, 'GET', '/v2/wakes?limit=1')).body;
    expect(page.next_cursor).toMatch(/^cur_/);
    const c = await call(sb.secret, 'GET', `/v2/wakes?limit=1&cursor=${page.next_cursor}`);
    expect(err(c)).toMatchObject({ status: 400, param: 'cursor' });
    // Naming production: 404, as an environment that does not exist.
    for (const path of [
      '/v2/wakes?environment=production',
      '/v2/stats?environment=production',
      '/v2/api-keys?environment=production',
    ]) {
      const r1 = err(await call(sb.secret, 'GET', path));
      const r2 = err(await call(sb.secret, 'GET', path.replace('production', 'nowhere')));
      expect(r1.status, path).toBe(404);
      expect(r1.message, path).toBe(r2.message?.replace('nowhere', 'production'));
    }
    const envs = (await call(sb.secret, 'GET', '/v2/environments')).body;
    expect(envs.data.map((e: { name: string }) => e.name)).toEqual(['sandbox']);
  });

  it("a live admin's replay of a sandbox wake needs ?environment=sandbox, reaches the sandbox origin, and its events stay in the sandbox", async () => {
    const sb = (
      await call(t.admin, 'POST', '/v2/api-keys', {
        label: 'sb-r',
        environment: 'sandbox',
        scopes: ['payments:read', 'webhooks:write'],
      })
    ).body;
    await call(t.admin, 'POST', '/v2/webhooks/endpoints', { url: rxP.url, events: ['*'] });
    await call(sb.secret, 'POST', '/v2/webhooks/endpoints', { url: rxS.url, events: ['*'] });
    const s = await fetch(`${t.url}/v2/payments/sb`, { headers: bearer(sb.secret) });
    await s.text();
    const wake = s.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    expect((await call(t.admin, 'POST', `/v2/wakes/${wake}/replay`, {})).status).toBe(404);
    hits.length = 0;
    const r = await call(t.admin, 'POST', `/v2/wakes/${wake}/replay?environment=sandbox`, {});
    expect(r.status).toBe(202);
    await call(t.admin, 'DELETE', `/v2/api-keys/${sb.id}?environment=sandbox`);
    const deadline = Date.now() + 5000;
    const types = () => rxS.got.map((g) => JSON.parse(g.body).type);
    while (Date.now() < deadline && !(types().includes('replay.finished') && types().includes('key.revoked')))
      await new Promise((x) => setTimeout(x, 50));
    expect(hits).toEqual(['SB sandbox']);
    expect(rxS.got.every((g) => JSON.parse(g.body).environment === 'sandbox')).toBe(true);
    const prodTypes = rxP.got.map((g) => JSON.parse(g.body).type);
    expect(prodTypes).not.toContain('replay.finished');
    expect(prodTypes).not.toContain('key.revoked');
  });

  it('a production key lacking keys:read is refused on HEAD too, before any lookup (403 for known and unknown ids alike)', async () => {
    const n = (
      await call(t.admin, 'POST', '/v2/api-keys', { label: 'n', environment: 'production', scopes: ['wakes:read'] })
    ).body;
    for (const path of [
      '/v2/api-keys',
      `/v2/api-keys/${n.id}`,
      '/v2/api-keys/key_zzzzzzzzzzzzzzzzzzzz',
      '/v2/webhooks/deliveries',
    ]) {
      const r = await fetch(`${t.url}${path}`, { method: 'HEAD', headers: bearer(n.secret) });
      expect(r.status, path).toBe(403);
    }
  });
});
