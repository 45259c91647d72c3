// Regression tests from a review of the /v2 API and CLI (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * SPEC Errors: "invalid_request 400: Request shape is wrong. param names the offending key"; docs/api.md:
 * "`label` and `consumer` are Unicode text of 1 to 128 characters"; docs/keys-and-limits.md: a key's own
 * rate_limit is "{limit, burst, window} of positive whole numbers up to 1e9"; SPEC: "GET /v2/wakes limit
 * parameter 1 to 100". A value far past a bound is told a bound that is not the contract's.
 */
describe('a value far past its bound is told the bound the contract gives', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway();
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  it('a 2,000-character label: "1 to 128 characters", not "<=1024"', async () => {
    const r = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'a'.repeat(2000),
      environment: 'production',
      scopes: ['wakes:read'],
    });
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe('label');
    expect(r.body.error.message).toMatch(/128/);
  });

  it('rate_limit.limit 1e16: "at most 1000000000", not "<=9007199254740991"', async () => {
    const r = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'big',
      environment: 'production',
      scopes: ['wakes:read'],
      rate_limit: { limit: 1e16, burst: 1, window: 'minute' },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe('rate_limit.limit');
    expect(r.body.error.message).toMatch(/1000000000|1e9/);
  });

  it('GET /v2/wakes?limit=10000000000: "must be at most 100", not "must be a whole number"', async () => {
    const r = await call(t.url, t.admin, 'GET', '/v2/wakes?limit=10000000000');
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe('limit');
    expect(r.body.error.message).toMatch(/at most 100/);
  });
});
