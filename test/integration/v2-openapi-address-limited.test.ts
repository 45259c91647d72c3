import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Regression tests from a review of rate limiting (2026-11-28).

/**
 * Review (rate limiting): /v2 calls on the main listener that no bucket ever limited.
 * The clock is frozen, so no bucket refills between requests.
 */
const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);

describe("a /v2 call open to anyone draws from its address's bucket", () => {
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

  it('GET /v2/openapi.json without a key: 3 from one address are 200 (its burst), the 17 after them 429', async () => {
    clock.set(T0 + 3_600_000);
    const statuses: number[] = [];
    let bytes = 0;
    for (let i = 0; i < 20; i++) {
      const r = await fetch(`${t.url}/v2/openapi.json`);
      bytes += (await r.arrayBuffer()).byteLength;
      statuses.push(r.status);
    }
    expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
    // Each one serialized on the control thread (the one thread /v2 is handed to) and sent whole.
    expect(new Set(statuses.slice(3)), `${bytes} bytes answered to one keyless address`).toEqual(new Set([429]));
  });
});
