// Regression tests from a review of rate limits and buckets (2026-11-27).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * DESIGN (Rate limits): "a table under pressure evicts the bucket that would be full
 * soonest and remembers its debt"; docs/keys-and-limits.md: "past max_buckets, the
 * oldest buckets are folded into a fixed-size sketch of when each would be full again,
 * and a new bucket starts from it". A key's bucket that spent one token of a 1000-token
 * burst owes one token (full again 86 s later). But the table folds in the end of the
 * key's *quota window* instead (SharedBuckets.fullAt takes max(full, Q_WIN)), so the
 * key comes back owing the whole rest of the day: ~0 tokens, 429 on its second request.
 */
describe('review: an evicted key bucket comes back owing its debt, not its quota window', () => {
  let origin: TestServer;
  let t: TestGateway;
  // One second into a UTC day: a day-window quota ends 86,399 s later.
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 0, 0, 1));
  const KEYS = 17; // one more than the table holds (max_buckets: 16, the minimum)

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end('ok');
    });
    t = await startGateway(
      {
        ratelimit: { max_buckets: 16, sketch_cells: 65536 },
        routes: [
          {
            name: 'api',
            prefix: '/api',
            scopes: { read: 'api:read', write: 'api:write' },
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

  const send = async (secret: string) => {
    const r = await fetch(`${t.url}/api/x`, { headers: bearer(secret) });
    await r.arrayBuffer();
    return { status: r.status, remaining: r.headers.get('x-ratelimit-remaining') };
  };

  it('17 keys of {1000/day, burst 1000} each sending 2 requests: all 34 admitted', async () => {
    const secrets: string[] = [];
    for (let i = 0; i < KEYS; i++) {
      const { secret } = await t.gw.keys.create(
        {
          label: `k${i}`,
          environment: 'production',
          scopes: ['api:read'],
          rate_limit: { limit: 1000, burst: 1000, window: 'day' },
        },
        'production',
      );
      secrets.push(secret);
    }
    const first = [];
    for (const s of secrets) first.push(await send(s));
    expect(first.map((r) => r.status)).toEqual(Array(KEYS).fill(200));
    const second = [];
    for (const s of secrets) second.push(await send(s));
    // Each key has spent 1 of 1000 tokens: its second request is within its burst, whatever
    // eviction did (its debt was one token). Today: 429s, the evicted keys coming back with
    // 1000 - 86,399 s x 1000/86,400 s = 0.01 tokens.
    expect(second.map((r) => `${r.status} r=${r.remaining}`)).toEqual(Array(KEYS).fill('200 r=998'));
  });
});
