// Regression tests from a review of time handling (2026-11-27).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

// Review (time): a token bucket whose wall clock steps backwards.
describe('rate limits when the wall clock steps back', () => {
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
    await r.arrayBuffer();
    return r;
  };

  it('a drained bucket refills again after an NTP step back of one hour: Retry-After is kept, not an hour of 429s', async () => {
    clock.set(T0);
    const { secret } = await t.gw.keys.create(
      {
        label: 'step-back',
        environment: 'production',
        scopes: ['payments:read'],
        // One token a second, two at most.
        rate_limit: { limit: 60, burst: 2, window: 'minute' },
      },
      'production',
    );
    expect((await get(secret)).status).toBe(200);
    expect((await get(secret)).status).toBe(200);
    const refused = await get(secret);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');

    // The host's clock was an hour fast; NTP steps it back.
    clock.set(T0 - 3_600_000);
    const after = await get(secret);
    expect(after.status).toBe(429);
    // The gateway itself tells the client to come back in 1 s...
    expect(after.headers.get('retry-after')).toBe('1');
    // ...and 5 s later (5 tokens' worth of refill) the key is admitted: the bucket's
    // last-refill time, an hour in the future, was taken back to now (it earned nothing
    // until the clock got back there, an hour of 429s).
    clock.advance(5_000);
    const later = await get(secret);
    expect(later.status, 'a key with 1 token/s stays at 429 for the whole hour the clock stepped back').toBe(200);
  });
});
