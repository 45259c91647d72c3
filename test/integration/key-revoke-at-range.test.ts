// Regression tests from a review of the key lifecycle (2026-11-28).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

/**
 * Storage holds instants up to 2299-12-31 (DateTime64(3)): a revoke_at past it was stored
 * as another instant, in the past, so the key was revoked at the next start. It is refused
 * (400 naming revoke_at); the last instant storage holds is kept exactly across a restart.
 */
describe('revoke_at beyond what storage holds', () => {
  let origin: TestServer;
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-revoke-at-range-'));
  const admin = `svc_live_${'q'.repeat(40)}`;
  const clock = new ManualClock(Date.UTC(2026, 10, 28, 12, 0, 0));
  let t: TestGateway | null = null;
  const start = async () => {
    t = await startGateway(
      { routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }] },
      { clock, dir, admin },
    );
    return t;
  };
  beforeAll(async () => {
    origin = await echoOrigin();
  });
  afterAll(async () => {
    await t?.stop();
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is refused with 400 naming revoke_at, the key left as it was', async () => {
    const g = await start();
    const c = await call(g.url, admin, 'POST', '/v2/api-keys', {
      label: 'far',
      environment: 'production',
      scopes: ['wakes:read'],
    });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    for (const at of ['2300-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z']) {
      const d = await call(g.url, admin, 'DELETE', `/v2/api-keys/${c.body.id}`, { revoke_at: at });
      expect(d.status, at).toBe(400);
      expect(d.body.error.type).toBe('invalid_request');
      expect(d.body.error.param).toBe('revoke_at');
      expect(d.body.error.message).toMatch(/2299-12-31T23:59:59\.999Z/);
    }
    const r = await call(g.url, admin, 'GET', `/v2/api-keys/${c.body.id}`);
    expect(r.body.revoke_at).toBeNull();
  });

  it('the last instant storage holds is kept exactly across a restart, and the key still works', async () => {
    const g = t ?? (await start());
    const at = '2299-12-31T23:59:59.999Z';
    const c = await call(g.url, admin, 'POST', '/v2/api-keys', {
      label: 'far-2299',
      environment: 'production',
      scopes: ['wakes:read'],
    });
    const d = await call(g.url, admin, 'DELETE', `/v2/api-keys/${c.body.id}`, { revoke_at: at });
    expect(d.status, JSON.stringify(d.body)).toBe(200);
    await g.stop();
    const g2 = await start();
    const r = await call(g2.url, admin, 'GET', `/v2/api-keys/${c.body.id}`);
    expect({ revoke_at: r.body.revoke_at, revoked_at: r.body.revoked_at }).toEqual({ revoke_at: at, revoked_at: null });
    const w = await fetch(`${g2.url}/v2/wakes?limit=1`, { headers: bearer(c.body.secret) });
    await w.text();
    expect(w.status).toBe(200);
  }, 30_000);
});
