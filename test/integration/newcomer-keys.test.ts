import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';

const HOUR = 3_600_000;

/** What docs/keys-and-limits.md says of rotation and scheduled revocation, held to the API. */
describe('keys as docs/keys-and-limits.md describes them', () => {
  let t: TestGateway;
  const api = (method: string, path: string, body?: unknown) => call(t.url, t.admin, method, path, body);
  const newKey = async (label: string) => {
    const r = await api('POST', '/v2/api-keys', { label, environment: 'production', scopes: ['wakes:read'] });
    expect(r.status).toBe(201);
    return r.body as { id: string };
  };

  beforeAll(async () => {
    t = await startGateway();
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it('rotating with an unknown key id in replaces is 404 naming replaces', async () => {
    const r = await api('POST', '/v2/api-keys', {
      label: 'successor',
      environment: 'production',
      scopes: ['wakes:read'],
      replaces: 'key_000000000AAAAAAAAAAAAAA',
    });
    expect(r.status).toBe(404);
    expect(r.body.error).toMatchObject({ type: 'resource_missing', param: 'replaces' });
  });

  it('a scheduled revocation is never pushed back: a later revoke_at is 409 conflict naming revoke_at, the key unchanged', async () => {
    const k = await newKey('scheduled');
    const at = new Date(Date.now() + HOUR).toISOString();
    const first = await api('DELETE', `/v2/api-keys/${k.id}`, { revoke_at: at });
    expect(first.status).toBe(200);
    expect(first.body.revoke_at).toBe(at);
    const later = await api('DELETE', `/v2/api-keys/${k.id}`, {
      revoke_at: new Date(Date.now() + 2 * HOUR).toISOString(),
    });
    expect(later.status).toBe(409);
    expect(later.body.error).toMatchObject({ type: 'conflict', param: 'revoke_at' });
    expect(later.body.error.message).toBe(
      `the revocation of key ${k.id} is already scheduled at ${at}; it can only be brought forward (an earlier revoke_at, or none to revoke now)`,
    );
    expect((await api('GET', `/v2/api-keys/${k.id}`)).body.revoke_at).toBe(at);
  });

  it('the same revoke_at again is 200 unchanged; an earlier one, or none, brings it forward', async () => {
    const k = await newKey('forward');
    const at = new Date(Date.now() + 2 * HOUR).toISOString();
    expect((await api('DELETE', `/v2/api-keys/${k.id}`, { revoke_at: at })).status).toBe(200);
    const same = await api('DELETE', `/v2/api-keys/${k.id}`, { revoke_at: at });
    expect(same.status).toBe(200);
    expect(same.body.revoke_at).toBe(at);
    const sooner = new Date(Date.now() + HOUR).toISOString();
    const earlier = await api('DELETE', `/v2/api-keys/${k.id}`, { revoke_at: sooner });
    expect(earlier.status).toBe(200);
    expect(earlier.body.revoke_at).toBe(sooner);
    // The time it was scheduled at before is now later than the schedule: refused too.
    expect((await api('DELETE', `/v2/api-keys/${k.id}`, { revoke_at: at })).status).toBe(409);
    const now = await api('DELETE', `/v2/api-keys/${k.id}`);
    expect(now.status).toBe(200);
    expect(now.body.revoked_at).not.toBeNull();
  });

  it('the OpenAPI document lists 409 for DELETE /v2/api-keys/{key_id}', async () => {
    const doc = await (await fetch(`${t.url}/v2/openapi.json`)).json();
    expect(Object.keys(doc.paths['/v2/api-keys/{key_id}'].delete.responses)).toContain('409');
  });
});
