import { describe, expect, it } from 'vitest';
import { Admission, isRefusal } from '../../src/admission/admission.js';
import { RouteTable } from '../../src/admission/routes.js';
import type { KeyRecord } from '../../src/auth/key.js';
import { KeyRing } from '../../src/auth/keyring.js';
import { hashSecret } from '../../src/auth/secrets.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/index.js';
import { newSecret } from '../../src/ids.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';

/**
 * DESIGN/security.md: "a keyless wake is never replayed onto a route that now needs a
 * key (409)". A route with auth: mtls needs a key (the client certificate's) as much as
 * auth: required does.
 */
describe('replay of a keyless wake onto a route that needs a key', () => {
  it('is refused (409), as onto auth: required', () => {
    const cfg = loadConfig({
      values: {
        server: {
          tls: {
            certificates: [{ cert: '/nonexistent/c.pem', key: '/nonexistent/k.pem' }],
            client_ca: '/nonexistent/ca.pem',
            client_auth: 'optional',
          },
        },
        routes: [
          {
            name: 'req',
            prefix: '/req',
            scopes: { read: 'api:read', write: 'api:write' },
            origins: { production: 'http://127.0.0.1:1' },
          },
          {
            name: 'm',
            prefix: '/m',
            auth: 'mtls',
            scopes: { read: 'api:read', write: 'api:write' },
            origins: { production: 'http://127.0.0.1:2' },
          },
        ],
      },
    });
    const ring = new KeyRing(
      null,
      createLogger('error', () => {}),
    );
    const secret = `svc_live_${newSecret()}`;
    const caller: KeyRecord = {
      id: 'key_caller',
      environment: 'production',
      label: 'c',
      consumer: 'c',
      scopes: ['api:read', 'wakes:write'],
      rate_limit: null,
      replaces: null,
      secret_hash: hashSecret(secret),
      created_at: 0,
      revoke_at: null,
      revoked_at: null,
      updated_at: 1,
    };
    ring.apply(caller);
    const admission = new Admission({
      routes: new RouteTable(cfg.routes, cfg.environments),
      ring,
      limiter: null,
      metrics: createMetrics({ process: false }),
      clock: new ManualClock(Date.UTC(2026, 0, 1)),
    });
    const keyless = (path: string) => ({ method: 'GET', path, environment: 'production', key_id: '' });
    const required = admission.replay(keyless('/req/x'), caller) as Awaited<ReturnType<typeof admission.replay>>;
    expect(isRefusal(required)).toBe(true);
    const mtls = admission.replay(keyless('/m/x'), caller) as Awaited<ReturnType<typeof admission.replay>>;
    expect(isRefusal(mtls), 'a keyless wake was admitted for replay onto an auth: mtls route').toBe(true);
  });
});
