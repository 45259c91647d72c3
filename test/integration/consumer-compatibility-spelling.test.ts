// Regression tests from a review of the /v2 API and CLI (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * docs/security.md, trust model, "a keys:write key ... cannot: give a key ... a consumer that a key it
 * could not manage already speaks for, in any spelling that differs only by case, Unicode normalization
 * or surrounding whitespace". DESIGN.md: "the origin trusts x-wakegate-consumer". Origins that normalize
 * identities do it with NFKC (Django's normalize_username, for one): "ａｄｍｉｎ" (fullwidth) is "admin".
 */
describe('a narrow keys:write key taking the admin consumer in a compatibility spelling', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway();
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  it('is refused (403 naming consumer) for "ａｄｍｉｎ", "ＡＤＭＩＮ" and "ᵃdmin", as it is for "Admin"', async () => {
    const narrow = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'issuer',
      environment: 'production',
      scopes: ['keys:write', 'wakes:read'],
    });
    expect(narrow.status).toBe(201);
    // The bootstrap key speaks for "admin"; the narrow key cannot manage it.
    const plain = await call(t.url, narrow.body.secret, 'POST', '/v2/api-keys', {
      label: 'x1',
      consumer: 'Admin',
      environment: 'production',
      scopes: ['wakes:read'],
    });
    expect(plain.status).toBe(403);
    expect(plain.body.error.param).toBe('consumer');

    const spelt: Record<string, number> = {};
    for (const consumer of ['ａｄｍｉｎ', 'ＡＤＭＩＮ', 'ᵃdmin']) {
      const r = await call(t.url, narrow.body.secret, 'POST', '/v2/api-keys', {
        label: `x-${consumer}`,
        consumer,
        environment: 'production',
        scopes: ['wakes:read'],
      });
      spelt[consumer] = r.status;
      // Each of these is "admin" after NFKC and case folding.
      expect(consumer.normalize('NFKC').toLowerCase()).toBe('admin');
    }
    expect(spelt, 'consumers that are "admin" to an origin normalizing with NFKC were issued').toEqual({
      ａｄｍｉｎ: 403,
      ＡＤＭＩＮ: 403,
      ᵃdmin: 403,
    });
  });
});
