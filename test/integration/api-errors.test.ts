import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * A parameter given with the wrong type (an array where a scalar is expected, a string
 * where a boolean is, a query parameter given twice) is told so, naming the parameter:
 * "is required" only when it is absent.
 */
describe('/v2 errors: a wrong-typed value is not reported as missing', () => {
  let t: TestGateway;
  let wakeId: string;
  beforeAll(async () => {
    t = await startGateway({});
    const r = await fetch(`${t.url}/v2/wakes?limit=1`, { headers: bearer(t.admin) });
    await r.arrayBuffer();
    wakeId = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
  });
  afterAll(async () => {
    await t.cleanup();
  });

  const send = async (method: string, path: string, body?: string) => {
    const r = await fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), ...(body ? { 'content-type': 'application/json' } : {}) },
      body,
    });
    return { status: r.status, body: (await r.json()) as { error: { type: string; message: string; param: string } } };
  };

  it('GET /v2/wakes?limit=1&limit=2: limit is given more than once', async () => {
    const r = await send('GET', '/v2/wakes?limit=1&limit=2');
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe('limit');
    expect(r.body.error.message).not.toMatch(/is required/);
    expect(r.body.error.message).toBe('limit: is given more than once');
  });

  it('POST /v2/api-keys with label: ["a"]: label must be a string', async () => {
    const r = await send(
      'POST',
      '/v2/api-keys',
      JSON.stringify({ label: ['a'], environment: 'production', scopes: ['wakes:read'] }),
    );
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe('label');
    expect(r.body.error.message).not.toMatch(/is required/);
    expect(r.body.error.message).toBe('label: must be a string, not an array');
  });

  it('POST /v2/wakes/{id}/replay with allow_unsafe: "true": allow_unsafe must be a boolean', async () => {
    const r = await send('POST', `/v2/wakes/${wakeId}/replay`, JSON.stringify({ allow_unsafe: 'true' }));
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe('allow_unsafe');
    expect(r.body.error.message).not.toMatch(/is required/);
    expect(r.body.error.message).toMatch(/^allow_unsafe: must be a boolean/);
  });

  it('POST /v2/api-keys with a JSON array body: the body must be a JSON object', async () => {
    const r = await send('POST', '/v2/api-keys', '[1,2]');
    expect(r.status).toBe(400);
    expect(r.body.error.message).not.toMatch(/is required/);
    expect(r.body.error).toMatchObject({ param: 'body', message: 'body: must be a JSON object, not an array' });
  });

  it('a field that is absent, or null where a string is wanted, is told apart', async () => {
    const absent = await send(
      'POST',
      '/v2/api-keys',
      JSON.stringify({ environment: 'production', scopes: ['wakes:read'] }),
    );
    expect(absent.body.error).toMatchObject({ param: 'label', message: 'label: is required' });
    const nul = await send(
      'POST',
      '/v2/api-keys',
      JSON.stringify({ label: null, environment: 'production', scopes: ['wakes:read'] }),
    );
    expect(nul.body.error).toMatchObject({ param: 'label', message: 'label: must be a string, not null' });
  });
});
