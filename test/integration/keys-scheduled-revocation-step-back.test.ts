// Regression tests from a review of the key lifecycle (2026-11-28).
// A scheduled revocation in force, then the wall clock steps back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);

/**
 * docs/keys-and-limits.md: "Revocation cannot be undone, by the clock either: a key revoked
 * stays refused when the host's clock is stepped back past its revoked_at". A scheduled
 * revocation in force (the key answered 401 key_revoked, GET shows revoked_at) is made
 * final only when the 250 ms sweep has raised key.revoked and written revoked_at; until
 * then isRevoked() reads `revoke_at <= now`, so a clock stepped back (NTP correcting a fast
 * clock) serves the refused key again, on the proxy and on /v2.
 */
describe('a scheduled revocation that has taken effect, then the clock steps back', () => {
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
    await t?.cleanup();
    await origin?.close();
  });

  it('the key refused at its revoke_at stays refused when the clock is stepped back a minute', async () => {
    const c = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'scheduled',
      environment: 'production',
      scopes: ['payments:read'],
    });
    expect(c.status).toBe(201);
    const at = T0 + 30_000;
    const d = await call(t.url, t.admin, 'DELETE', `/v2/api-keys/${c.body.id}`, {
      revoke_at: new Date(at).toISOString(),
    });
    expect(d.status).toBe(200);
    clock.set(at + 30_000);
    const refused = await fetch(`${t.url}/pay/x`, { headers: bearer(c.body.secret) });
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { error: { type: string } }).error.type).toBe('key_revoked');
    // NTP corrects a clock that ran 60 s fast.
    clock.set(at - 30_000);
    const again = await fetch(`${t.url}/pay/x`, { headers: bearer(c.body.secret) });
    await again.text();
    expect(again.status, 'the key refused as revoked is served again').toBe(401);
  });
});
