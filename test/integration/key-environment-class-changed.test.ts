// Regression tests from a review of the key lifecycle (2026-11-28).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * SPEC: "The prefix identifies the environment class"; "A sandbox key never reads
 * production data, whatever its scopes"; DESIGN: a test-class key can never name another
 * environment. The class a key acts with is read from the config at each call, not from
 * the key: an operator who promotes `qa` from class test to live turns every svc_test_ key
 * already issued there into one that may name production (list its keys, read its wakes,
 * issue keys there).
 */
describe('a svc_test_ key after its environment is made live', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-review-class-'));
  const admin = `svc_live_${'c'.repeat(40)}`;
  let t: TestGateway | null = null;
  afterAll(async () => {
    await t?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('no longer authenticates, so it cannot name production', async () => {
    t = await startGateway({ environments: { qa: { class: 'test' } } }, { dir, admin });
    const c = await call(t.url, admin, 'POST', '/v2/api-keys', {
      label: 'qa-tool',
      environment: 'qa',
      scopes: ['wakes:read', 'keys:read'],
    });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    expect(c.body.secret.startsWith('svc_test_')).toBe(true);
    expect((await call(t.url, c.body.secret, 'GET', '/v2/api-keys?environment=production')).status).toBe(404);
    await t.stop();
    t = await startGateway({ environments: { qa: { class: 'live' } } }, { dir, admin });
    // The key's prefix no longer names its environment's class: it stands no more (401), in
    // its own environment too, and the admin's keys are untouched.
    const r = await call(t.url, c.body.secret, 'GET', '/v2/api-keys?environment=production');
    expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(401);
    expect(r.body.error.type).toBe('authentication_required');
    expect(r.body.error.message).toMatch(/no longer/);
    expect((await call(t.url, c.body.secret, 'GET', '/v2/api-keys')).status).toBe(401);
    expect((await call(t.url, admin, 'GET', '/v2/api-keys?environment=qa')).status).toBe(200);
  }, 30_000);
});
