// Regression tests from a review of the key lifecycle (2026-11-28).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * An operator removes (or renames) `staging` in the config and restarts. A staging key
 * still authenticates on /v2 (its own environment is the default of every call: it reads
 * staging's wakes and keys, and revokes staging keys), but the operator's admin key cannot
 * see, read or revoke it: every call naming environment=staging is 422 "unknown
 * environment". A key the API can neither list nor revoke must not be one that still works.
 */
describe('keys of an environment removed from the config', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-review-env-'));
  const admin = `svc_live_${'e'.repeat(40)}`;
  let t: TestGateway | null = null;
  afterAll(async () => {
    await t?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('no longer authenticates', async () => {
    t = await startGateway({ environments: { staging: { class: 'live' } } }, { dir, admin });
    const c = await call(t.url, admin, 'POST', '/v2/api-keys', {
      label: 'staging-reader',
      environment: 'staging',
      scopes: ['wakes:read', 'keys:read', 'keys:write'],
    });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    await t.stop();
    t = await startGateway({}, { dir, admin });
    const works = await fetch(`${t.url}/v2/api-keys`, { headers: bearer(c.body.secret) });
    const worksBody = await works.text();
    const del = await call(t.url, admin, 'DELETE', `/v2/api-keys/${c.body.id}?environment=staging`);
    const list = await call(t.url, admin, 'GET', '/v2/api-keys?environment=staging');
    // The orphaned key no longer works: the API can no longer name its environment.
    expect(works.status, worksBody.slice(0, 200)).toBe(401);
    expect(JSON.parse(worksBody).error.type).toBe('authentication_required');
    expect(del.status).toBe(422);
    expect(list.status).toBe(422);
    // The admin key (in production, still configured) is untouched.
    expect((await call(t.url, admin, 'GET', '/v2/api-keys')).status).toBe(200);
  }, 30_000);
});

describe('the bootstrap admin key when its environment is no longer live', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-review-env-admin-'));
  const admin = `svc_live_${'f'.repeat(40)}`;
  let t: TestGateway | null = null;
  afterAll(async () => {
    await t?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is moved to the first live environment and keeps working', async () => {
    t = await startGateway({}, { dir, admin });
    const before = await call(t.url, admin, 'GET', '/v2/environments');
    expect(before.body.key.environment).toBe('production');
    await t.stop();
    t = await startGateway(
      { environments: { production: { class: 'test' }, main: { class: 'live' } } },
      { dir, admin },
    );
    const after = await call(t.url, admin, 'GET', '/v2/environments');
    expect(after.status, JSON.stringify(after.body).slice(0, 300)).toBe(200);
    expect(after.body.key.environment).toBe('main');
    expect(after.body.key.id).toBe(before.body.key.id);
    expect((await call(t.url, admin, 'GET', '/v2/api-keys?environment=production')).status).toBe(200);
  }, 30_000);
});
