// Regression tests from a review of rate limiting (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { newWakeId } from '../../src/ids.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * A replay refused (here: an unknown wake, each one a storage lookup) takes a token of
 * the caller's own bucket, so a key cannot look wakes up without limit. The clock is
 * frozen, so no bucket refills between requests.
 */
const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);

describe("a refused replay draws from its caller's bucket", () => {
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
        rate_limits: {
          default: { limit: 3, burst: 3, window: 'minute' },
          unauthenticated: { limit: 3, burst: 3, window: 'minute' },
        },
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it("POST /v2/wakes/{id}/replay of an unknown wake: 404 with the bucket's headers within a burst of 3, then 429", async () => {
    clock.set(T0);
    const { secret } = await t.gw.keys.create(
      {
        label: 'replayer',
        environment: 'production',
        scopes: ['wakes:read', 'wakes:write', 'payments:read'],
        rate_limit: { limit: 3, burst: 3, window: 'minute' },
      },
      'production',
    );
    const statuses: number[] = [];
    const remaining: (string | null)[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await fetch(`${t.url}/v2/wakes/${newWakeId(T0 - 1000)}/replay`, {
        method: 'POST',
        headers: { ...bearer(secret), 'content-type': 'application/json' },
        body: '{}',
      });
      const body = await r.json();
      statuses.push(r.status);
      remaining.push(r.headers.get('x-ratelimit-remaining'));
      if (r.status === 429) expect(body.error.type).toBe('rate_limit_exceeded');
      else expect(body.error.param).toBe('wake_id');
    }
    expect(statuses).toEqual([404, 404, 404, 429, 429, 429]);
    expect(remaining.slice(0, 3)).toEqual(['2', '1', '0']);
  });
});
