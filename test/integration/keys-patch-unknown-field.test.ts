// Regression tests from a review of the key lifecycle (2026-11-28).
// PATCH /v2/api-keys/{id} with a field it does not take.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * DESIGN.md, Errors: "Unknown query parameters and body fields are 400 invalid_request
 * naming param". An operator on their second day tries to rename a key or change its
 * scopes with PATCH; the answer must name the field PATCH does not take (`label`,
 * `scopes`), not tell them that `tls_fingerprint` "is required".
 */
describe('PATCH /v2/api-keys/{id} with an unknown field', () => {
  let t: TestGateway;
  let id: string;
  beforeAll(async () => {
    t = await startGateway({});
    const c = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'reader',
      environment: 'production',
      scopes: ['wakes:read'],
    });
    expect(c.status).toBe(201);
    id = c.body.id;
  });
  afterAll(async () => t?.cleanup());

  for (const [field, value] of [
    ['label', 'renamed'],
    ['scopes', ['wakes:read', 'keys:write']],
    ['revoke_at', '2030-01-01T00:00:00.000Z'],
  ] as const) {
    it(`{"${field}": ...} alone is 400 invalid_request naming ${field}`, async () => {
      const r = await call(t.url, t.admin, 'PATCH', `/v2/api-keys/${id}`, { [field]: value });
      expect(r.status).toBe(400);
      expect(r.body.error.type).toBe('invalid_request');
      expect(r.body.error.param, r.body.error.message).toBe(field);
      // Nothing changed.
      const g = await call(t.url, t.admin, 'GET', `/v2/api-keys/${id}`);
      expect(g.body.label).toBe('reader');
      expect(g.body.scopes).toEqual(['wakes:read']);
    });
  }
});
