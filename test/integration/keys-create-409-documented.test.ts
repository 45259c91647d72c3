// Regression tests from a review of the key lifecycle (2026-11-28).
// the statuses POST /v2/api-keys answers vs the ones it documents.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * docs/keys-and-limits.md: a `replaces` naming a revoked or scheduled key, or one already
 * replaced, is 409 conflict naming replaces; a tls_fingerprint already naming a live key is
 * 409. The OpenAPI document (and docs/api.md, generated from it) lists for POST
 * /v2/api-keys only 400, 401, 403, 404, 413, 422, 429: a client generated from it has no
 * branch for the 409 an operator's rotation gets.
 */
describe('POST /v2/api-keys documents the 409 it answers', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({});
  });
  afterAll(async () => t?.cleanup());

  it('a second rotation of one key is 409 conflict, and the OpenAPI document lists 409 for the create', async () => {
    const a = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'old',
      environment: 'production',
      scopes: ['wakes:read'],
    });
    expect(a.status).toBe(201);
    const b = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'new',
      environment: 'production',
      scopes: ['wakes:read'],
      replaces: a.body.id,
    });
    expect(b.status).toBe(201);
    const c = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'newer',
      environment: 'production',
      scopes: ['wakes:read'],
      replaces: a.body.id,
    });
    expect(c.status).toBe(409);
    expect(c.body.error).toMatchObject({ type: 'conflict', param: 'replaces' });
    const doc = await (await fetch(`${t.url}/v2/openapi.json`)).json();
    expect(Object.keys(doc.paths['/v2/api-keys'].post.responses)).toContain('409');
  });
});
