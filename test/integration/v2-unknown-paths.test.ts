import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * A /v2 call no operation takes (an unknown path, a method the path does not have, a
 * method no endpoint has) passes the one admission as a call any key may make: no key
 * (or a refused one) is 401 before anything is said about the path, and the
 * unauthenticated bucket is drawn; a live key gets 404 or 405 with Allow.
 */
describe('/v2 paths and methods no operation takes', () => {
  let t: TestGateway;
  let plain = '';
  beforeAll(async () => {
    t = await startGateway({});
    // A key with no management scope at all: any live key is told about paths.
    const r = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'plain',
      environment: 'production',
      scopes: ['wakes:read'],
    });
    expect(r.status).toBe(201);
    plain = r.body.secret;
  });
  afterAll(async () => {
    await t.cleanup();
  });

  const raw = async (base: string, method: string, path: string, headers: Record<string, string>, body?: string) => {
    const r = await fetch(`${base}${path}`, { method, headers, body });
    const text = await r.text();
    // biome-ignore lint/suspicious/noExplicitAny: read loosely
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {}
    return {
      status: r.status,
      type: json?.error?.type as string | undefined,
      wakeId: json?.error?.wake_id as string | undefined,
      www: r.headers.get('www-authenticate'),
      allow: r.headers.get('allow'),
      limit: r.headers.get('x-ratelimit-limit'),
    };
  };

  const cases: [string, string, string | undefined][] = [
    ['GET', '/v2/api-keys/key_x/nothing', undefined],
    ['GET', '/v2/wakes/wk_x/nope', undefined],
    ['DELETE', '/v2/stats/x', undefined],
    ['PUT', '/v2/api-keys', '{}'],
    ['DELETE', '/v2/wakes', undefined],
    ['POST', '/v2/stats', '{}'],
    ['QUERY', '/v2/wakes', '{}'],
    ['PROPFIND', '/v2/api-keys', undefined],
  ];

  it('without a key, or with an unknown or malformed one: 401 authentication_required, Bearer', async () => {
    for (const base of [t.url, t.managementUrl]) {
      for (const [method, path, body] of cases) {
        for (const headers of [
          {},
          { 'content-type': 'application/json' },
          bearer('svc_live_not_a_key_of_this_gateway_000000'),
          { authorization: 'Basic Zm9vOmJhcg==' },
        ] as Record<string, string>[]) {
          const r = await raw(base, method, path, headers, body);
          const what = `${base} ${method} ${path} ${JSON.stringify(headers)}`;
          expect({ status: r.status, www: r.www, allow: r.allow }, what).toEqual({
            status: 401,
            www: 'Bearer',
            allow: null,
          });
          expect(r.type, what).toBe('authentication_required');
          expect(r.wakeId, what).toMatch(/^wk_/);
        }
      }
    }
  });

  it('a revoked key is told it is revoked, not about the path', async () => {
    const made = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'gone',
      environment: 'production',
      scopes: ['wakes:read'],
    });
    expect((await call(t.url, t.admin, 'DELETE', `/v2/api-keys/${made.body.id}`)).status).toBe(200);
    for (const [method, path, body] of cases) {
      const r = await raw(t.url, method, path, bearer(made.body.secret), body);
      expect({ status: r.status, type: r.type }, `${method} ${path}`).toEqual({ status: 401, type: 'key_revoked' });
    }
  });

  it('with any live key: 404 resource_missing, or 405 with Allow, and the rate-limit headers', async () => {
    for (const base of [t.url, t.managementUrl]) {
      for (const secret of [t.admin, plain]) {
        const nf = await raw(base, 'GET', '/v2/api-keys/key_x/nothing', bearer(secret));
        expect({ status: nf.status, type: nf.type, allow: nf.allow }).toEqual({
          status: 404,
          type: 'resource_missing',
          allow: null,
        });
        expect(nf.limit).not.toBeNull();
        for (const [method, path, body] of [
          ['PUT', '/v2/api-keys', '{}'],
          ['QUERY', '/v2/wakes', '{}'],
          ['PROPFIND', '/v2/api-keys', undefined],
        ] as const) {
          const headers = { ...bearer(secret), 'content-type': 'application/json' };
          const r = await raw(base, method, path, headers, body);
          expect({ status: r.status, type: r.type }, `${method} ${path}`).toEqual({
            status: 405,
            type: 'invalid_request',
          });
          expect(r.allow, `${method} ${path}`).toContain('GET');
          expect(r.limit, `${method} ${path}`).not.toBeNull();
        }
      }
    }
  });

  it('the public OpenAPI document is still served without a key; a wrong method on it asks for one', async () => {
    for (const base of [t.url, t.managementUrl]) {
      const g = await fetch(`${base}/v2/openapi.json`);
      expect(g.status).toBe(200);
      expect(((await g.json()) as { openapi: string }).openapi).toMatch(/^3\./);
      const h = await fetch(`${base}/v2/openapi.json`, { method: 'HEAD' });
      expect(h.status).toBe(200);
      const p = await raw(base, 'POST', '/v2/openapi.json', {});
      expect({ status: p.status, type: p.type }).toEqual({ status: 401, type: 'authentication_required' });
      const pk = await raw(base, 'POST', '/v2/openapi.json', bearer(plain));
      expect({ status: pk.status, allow: pk.allow }).toEqual({ status: 405, allow: 'GET, HEAD' });
    }
    const health = await fetch(`${t.opsUrl}/healthz`);
    expect(health.status).toBe(200);
  });
});

describe('/v2 calls no operation takes draw from the unauthenticated bucket', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({ rate_limits: { unauthenticated: { limit: 3, burst: 3, window: 'hour' } } });
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it('without a key: 401 three times, then 429 with retry-after', async () => {
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (const [method, path] of [
      ['GET', '/v2/stats/x'],
      ['PUT', '/v2/api-keys'],
      ['QUERY', '/v2/wakes'],
      ['GET', '/v2/api-keys/key_x/nothing'],
      ['PUT', '/v2/wakes'],
    ]) {
      const r = await fetch(`${t.url}${path}`, { method });
      await r.arrayBuffer();
      statuses.push(r.status);
      if (r.status === 429) retryAfter = r.headers.get('retry-after');
    }
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    expect(Number(retryAfter)).toBeGreaterThan(0);
  });
});
