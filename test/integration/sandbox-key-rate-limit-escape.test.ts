// Regression tests from a review of the /v2 API and CLI (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * DESIGN.md "The /v2 API": "a key can never create, replace, rotate or revoke a key that could do
 * something it cannot: a scope it lacks, a rate limit above its own, ...".
 * docs/keys-and-limits.md: "A key issues keys only with scopes it holds, and never with a rate limit
 * above its own (a higher rate per second or a larger burst ...): 403 insufficient_scope naming rate_limit."
 * DESIGN.md "Rate limits": "every test-class key shares the one sandbox bucket instead" (of its own rate_limit).
 */
describe('a rate-limited live key issuing a sandbox key', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway();
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  it('cannot mint a sandbox key that sends more than its own burst (the sandbox bucket is 1200, burst 1200)', async () => {
    // A live, non-admin key held to 10 a minute, burst 3.
    const limited = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'limited issuer',
      environment: 'production',
      scopes: ['keys:write', 'wakes:read'],
      rate_limit: { limit: 10, burst: 3, window: 'minute' },
    });
    expect(limited.status).toBe(201);

    // It names the same (low) rate limit for the sandbox key it issues.
    const minted = await call(t.url, limited.body.secret, 'POST', '/v2/api-keys', {
      label: 'minted sandbox key',
      environment: 'sandbox',
      scopes: ['wakes:read'],
      rate_limit: { limit: 10, burst: 3, window: 'minute' },
    });
    if (minted.status !== 201) {
      // Refusing the issue is one correct answer.
      expect(minted.status).toBe(403);
      expect(minted.body.error).toMatchObject({ type: 'insufficient_scope', param: 'rate_limit' });
      return;
    }
    // Issued: then it must be held to no more than its issuer's burst (3). It is not:
    // a test-class key spends from the shared sandbox bucket (1200/minute, burst 1200).
    const statuses: number[] = [];
    let limitHeader: string | null = null;
    for (let i = 0; i < 10; i++) {
      const r = await fetch(`${t.url}/v2/wakes?limit=1`, { headers: bearer(minted.body.secret) });
      await r.arrayBuffer();
      statuses.push(r.status);
      limitHeader = r.headers.get('x-ratelimit-limit');
    }
    // The issuer itself gets 429 after 3; so must the key it issued.
    expect(
      { statuses, x_ratelimit_limit: limitHeader },
      'a key limited to 10/minute (burst 3) issued a key that makes 10 calls at once under a limit of 1200',
    ).toMatchObject({ statuses: expect.arrayContaining([429]) });
  });
});
