import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Regression tests from a review of rate limiting (2026-11-28).

/**
 * Review (rate limiting): a request whose Via names this gateway is refused 508 before the
 * key and the buckets, "charged to no one" (admission.ts: `if (a.looped) return
 * keyRefusal(LOOP_REFUSED)`). The name is no secret: every forwarded request carries it to
 * the origin, and an origin that reflects request headers (a /headers debug endpoint, an
 * error page) shows it to any client. A client that has it once can then send requests
 * without any key that no per-address bucket ever limits, each stored as a wake, whereas
 * every other refusal before the key (404 no route, 400 unsafe path or Host, 401) draws from
 * the address's `unauthenticated` bucket and is sampled past it ("never a wake each").
 */
const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);

describe('a forged Via naming the gateway', () => {
  let origin: TestServer;
  let t: TestGateway;
  const clock = new ManualClock(T0);

  beforeAll(async () => {
    // An origin that reflects the request's Via (as httpbin's /headers does all of them).
    origin = await startServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ via: req.headers.via ?? null }));
    });
    t = await startGateway(
      {
        routes: [
          { name: 'echo', prefix: '/echo', auth: 'none', origins: { production: origin.url } },
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

  it('an address past its unauthenticated allowance sends 40 keyless requests with that Via: all 508, and sampled, not a stored wake each', async () => {
    clock.set(T0);
    const learned = (await (await fetch(`${t.url}/echo/headers`)).json()) as { via: string };
    expect(learned.via).toMatch(/wakegate-[0-9a-f]{8}/);
    // The control: the same client's keyless requests refused otherwise are limited after 3.
    const control: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await fetch(`${t.url}/pay/control-${i}`);
      await r.text();
      control.push(r.status);
    }
    expect(control).toEqual([401, 401, 401, 429, 429]);
    // Now the same address, its unauthenticated allowance spent, with the Via it learned.
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      const r = await fetch(`${t.url}/pay/forged-${i}`, { headers: { via: learned.via } });
      await r.text();
      statuses.push(r.status);
    }
    // Still the loop's answer (a 429 would hide a real loop).
    expect(new Set(statuses)).toEqual(new Set([508]));
    await flushed(t.gw);
    const admin = await fetch(`${t.url}/v2/wakes?status=508&limit=100`, { headers: bearer(t.admin) });
    const stored = ((await admin.json()) as { data: unknown[] }).data.length;
    // Past the address's allowance, limited (429) or, if a real loop must stay 508, sampled as
    // every other pre-key refusal is (1 in 100 stored): not one stored wake per request.
    expect(stored, `wakes stored for 40 forged-Via requests (statuses ${[...new Set(statuses)]})`).toBeLessThanOrEqual(
      10,
    );
  });
});
