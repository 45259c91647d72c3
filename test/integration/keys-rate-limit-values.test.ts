import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { hashSecret, newKeySecret } from '../../src/auth/secrets.js';
import { newKeyId } from '../../src/ids.js';
import { KeyTable } from '../../src/store/keys.js';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

/**
 * A key's rate_limit: a policy of the config by name (its own names only, never a member
 * of Object.prototype), or its own {limit, burst, window} of finite positive numbers.
 * Anything else is refused; a key stored with an unusable one is held to `default`.
 */
describe('/v2/api-keys rate_limit values', () => {
  let origin: TestServer;
  let t: TestGateway;
  let issuer = '';
  const base = { label: 'child', environment: 'production', scopes: ['payments:read'] };
  const config = (originUrl: string) => ({
    routes: [
      {
        name: 'payments',
        prefix: '/v2/payments',
        scopes: { read: 'payments:read', write: 'payments:write' },
        origins: { production: originUrl },
      },
    ],
    rate_limits: { default: { limit: 30, burst: 30, window: 'minute' } },
  });
  /** Sends `n` requests with `secret`; how many were let through, and the last limit header. */
  const drain = async (secret: string, n: number) => {
    let ok = 0;
    let limit: string | null = null;
    for (let i = 0; i < n; i++) {
      const r = await fetch(`${t.url}/v2/payments/p_${i}`, { headers: bearer(secret) });
      await r.arrayBuffer();
      if (r.status === 200) ok++;
      limit = r.headers.get('x-ratelimit-limit');
    }
    return { ok, limit };
  };

  beforeAll(async () => {
    origin = await echoOrigin('prod');
    t = await startGateway(config(origin.url));
    // A non-admin issuer held to 20 a minute, burst 20.
    const r = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'issuer',
      environment: 'production',
      scopes: ['keys:write', 'keys:read', 'payments:read'],
      rate_limit: { limit: 20, burst: 20, window: 'minute' },
    });
    expect(r.status).toBe(201);
    issuer = r.body.secret;
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf']) {
    it(`rate_limit ${JSON.stringify(name)} is 422 unprocessable naming rate_limit, for an admin and any key`, async () => {
      for (const secret of [t.admin, issuer]) {
        const r = await call(t.url, secret, 'POST', '/v2/api-keys', { ...base, rate_limit: name });
        expect({ status: r.status, error: r.body.error, rate_limit: r.body.rate_limit }).toMatchObject({
          status: 422,
          error: { type: 'unprocessable', param: 'rate_limit' },
          rate_limit: undefined,
        });
        expect(r.body.error.message).toContain('unknown rate limit policy');
      }
    });
  }

  it('a configured policy by name is still taken, and held to its limits', async () => {
    const r = await call(t.url, t.admin, 'POST', '/v2/api-keys', { ...base, rate_limit: 'reports' });
    expect(r.status).toBe(201);
    expect(r.body.rate_limit).toEqual({ limit: 600, burst: 600, window: 'minute' });
  });

  it('an issuer cannot make a key beyond its own rate limit, by name or inline', async () => {
    for (const rate_limit of [
      'reports',
      { limit: 21, burst: 20, window: 'minute' },
      { limit: 20, burst: 21, window: 'minute' },
    ]) {
      const r = await call(t.url, issuer, 'POST', '/v2/api-keys', { ...base, rate_limit });
      expect({ status: r.status, type: r.body.error?.type, param: r.body.error?.param }).toEqual({
        status: 403,
        type: 'insufficient_scope',
        param: 'rate_limit',
      });
    }
  });

  it('an inline rate limit that is not finite positive integers in range is 400 naming rate_limit or its member', async () => {
    const bad: unknown[] = [
      { limit: 0, burst: 1, window: 'minute' },
      { limit: -5, burst: 1, window: 'minute' },
      { limit: 1, burst: 0, window: 'minute' },
      { limit: 1, burst: -1, window: 'minute' },
      { limit: 1.5, burst: 1, window: 'minute' },
      { limit: 1e10, burst: 1, window: 'minute' },
      { limit: 1, burst: 1e300, window: 'minute' },
      { limit: '10', burst: 1, window: 'minute' },
      { limit: null, burst: 1, window: 'minute' },
      { limit: 1, burst: 1, window: 'constructor' },
      { limit: 1, burst: 1, window: 'week' },
      { limit: 1, burst: 1 },
      {},
      [],
      5,
      '',
    ];
    for (const rate_limit of bad) {
      const r = await call(t.url, t.admin, 'POST', '/v2/api-keys', { ...base, rate_limit });
      expect({ status: r.status, type: r.body.error?.type }, JSON.stringify(rate_limit)).toEqual({
        status: 400,
        type: 'invalid_request',
      });
      // rate_limit, or the member of it at fault (rate_limit.limit).
      expect(r.body.error.param, JSON.stringify(rate_limit)).toMatch(/^rate_limit\b/);
    }
    // NaN and Infinity are not JSON; written as big literals they are refused the same.
    for (const raw of ['1e999', '-1e999']) {
      const r = await fetch(`${t.url}/v2/api-keys`, {
        method: 'POST',
        headers: { ...bearer(t.admin), 'content-type': 'application/json' },
        body: `{"label":"x","environment":"production","scopes":["payments:read"],"rate_limit":{"limit":${raw},"burst":1,"window":"minute"}}`,
      });
      const b = (await r.json()) as { error: { type: string; param: string } };
      expect({ status: r.status, type: b.error.type }, raw).toEqual({ status: 400, type: 'invalid_request' });
      expect(b.error.param, raw).toMatch(/^rate_limit\b/);
    }
  });

  it("PATCH cannot change a key's rate_limit (400 naming it), whatever the value", async () => {
    const made = await call(t.url, issuer, 'POST', '/v2/api-keys', {
      ...base,
      label: 'patched',
      rate_limit: { limit: 10, burst: 10, window: 'minute' },
    });
    expect(made.status).toBe(201);
    for (const rate_limit of ['constructor', '__proto__', { limit: 1e9, burst: 1e9, window: 'second' }, null]) {
      const r = await call(t.url, issuer, 'PATCH', `/v2/api-keys/${made.body.id}`, {
        tls_fingerprint: null,
        rate_limit,
      });
      expect({ status: r.status, type: r.body.error?.type }, JSON.stringify(rate_limit)).toEqual({
        status: 400,
        type: 'invalid_request',
      });
      expect(r.body.error.param, JSON.stringify(rate_limit)).toContain('rate_limit');
    }
    const after = await call(t.url, issuer, 'GET', `/v2/api-keys/${made.body.id}`);
    expect(after.body.rate_limit).toEqual({ limit: 10, burst: 10, window: 'minute' });
  });

  it('a key stored with an unusable rate_limit (before this was refused) is held to default after a restart', async () => {
    const table = new KeyTable(t.gw.store);
    const now = Date.now();
    const stored = async (rate_limit: unknown, scopes: string[]) => {
      const secret = newKeySecret('live');
      const k: KeyRecord = {
        id: newKeyId(),
        environment: 'production',
        label: 'old',
        consumer: `old-${secret.slice(-6)}`,
        scopes,
        rate_limit: rate_limit as KeyRecord['rate_limit'],
        replaces: null,
        secret_hash: hashSecret(secret),
        created_at: now,
        revoke_at: null,
        revoked_at: null,
        updated_at: now,
      };
      await table.put(k);
      return secret;
    };
    const empty = await stored({}, ['payments:read', 'keys:write']);
    const odd = await stored({ limit: 'x', burst: -1, window: 'constructor' }, ['payments:read']);
    const dir = t.dir;
    const admin = t.admin;
    await t.stop();
    t = await startGateway(config(origin.url), { dir, admin });
    // Such a key, as an issuer, makes no key above default (30 a minute, burst 30 here).
    const r = await call(t.url, empty, 'POST', '/v2/api-keys', {
      ...base,
      rate_limit: { limit: 1e9, burst: 1e9, window: 'second' },
    });
    expect({ status: r.status, param: r.body.error?.param }).toEqual({ status: 403, param: 'rate_limit' });
    // That call drew one from its bucket.
    expect(await drain(empty, 40)).toEqual({ ok: 29, limit: '30' });
    expect(await drain(odd, 40)).toEqual({ ok: 30, limit: '30' });
  });
});

describe('/v2/api-keys names of Object.prototype elsewhere', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({});
  });
  afterAll(async () => {
    await t.cleanup();
  });
  const base = { label: 'x', environment: 'production', scopes: ['wakes:read'] };

  for (const env of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
    it(`environment ${JSON.stringify(env)} is 422 naming environment, in a body and a query`, async () => {
      const r = await call(t.url, t.admin, 'POST', '/v2/api-keys', { ...base, environment: env });
      expect({ status: r.status, type: r.body.error?.type, param: r.body.error?.param }).toEqual({
        status: 422,
        type: 'unprocessable',
        param: 'environment',
      });
      const g = await call(t.url, t.admin, 'GET', `/v2/api-keys?environment=${env}`);
      expect({ status: g.status, param: g.body.error?.param }).toEqual({ status: 422, param: 'environment' });
    });
  }

  it('a __proto__ member in the body is 400 invalid_request, and grants nothing', async () => {
    const r = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: '{"label":"x","environment":"production","scopes":["wakes:read"],"__proto__":{"scopes":["keys:write"]}}',
    });
    const b = (await r.json()) as { error: { type: string } };
    expect({ status: r.status, type: b.error.type }).toEqual({ status: 400, type: 'invalid_request' });
  });
});
