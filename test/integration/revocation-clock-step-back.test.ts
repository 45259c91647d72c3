// Regression tests from a review of time handling (2026-11-27).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

// A key revoked at once, then the wall clock steps back (NTP correcting a fast clock).
describe('immediate revocation when the wall clock steps back', () => {
  let origin: TestServer;
  let t: TestGateway;
  const clock = new ManualClock(T0);

  beforeAll(async () => {
    origin = await startServer((_req, res) => res.end('ok'));
    t = await startGateway(
      {
        routes: [
          {
            name: 'pay',
            prefix: '/pay',
            scopes: { read: 'payments:read', write: 'payments:write' },
            origins: { production: origin.url },
          },
        ],
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const get = async (secret: string) => {
    const r = await fetch(`${t.url}/pay/x`, { headers: bearer(secret) });
    return { status: r.status, text: await r.text() };
  };

  it('a key revoked by DELETE (leak response) stays refused after the clock is stepped back a minute', async () => {
    clock.set(T0);
    const { key, secret } = await t.gw.keys.create(
      { label: 'leaked', environment: 'production', scopes: ['payments:read'] },
      'production',
    );
    expect((await get(secret)).status).toBe(200);
    const del = await call(t.managementUrl, t.admin, 'DELETE', `/v2/api-keys/${key.id}`);
    expect(del.status).toBe(200);
    const refused = await get(secret);
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.text).error.type).toBe('key_revoked');

    // NTP corrects a clock that ran 60 s fast.
    clock.set(T0 - 60_000);
    const again = await get(secret);
    expect(again.status, 'the revoked (leaked) key is served again by the origin').toBe(401);

    // And the API still says it is revoked.
    const shown = await call(t.managementUrl, t.admin, 'GET', `/v2/api-keys/${key.id}`);
    expect(shown.body.revoked_at).not.toBeNull();
  });
});
