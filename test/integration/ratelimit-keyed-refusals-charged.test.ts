import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Regression tests from a review of rate limiting (2026-11-28).

/**
 * Review (rate limiting): DESIGN "Every keyed request (proxied or /v2) takes a token from
 * its key's bucket", and keys-and-limits.md wants no flood of refusals to cost a wake
 * each. Requests with a *valid* key that admission refuses after the key step but before
 * the buckets (403 insufficient_scope, 404 no origin for the key's environment) draw from
 * no bucket at all: neither the key's nor the address's. A key can send them for ever,
 * never a 429, each one stored as a wake. The clock is frozen: no bucket refills.
 */
const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);

describe('keyed requests refused before the buckets are limited too', () => {
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
            // No sandbox origin: a sandbox key here is 404.
            origins: { production: origin.url },
          },
        ],
        rate_limits: {
          // The per-address buckets small too: if these requests were charged there, it shows.
          default: { limit: 3, burst: 3, window: 'minute' },
          sandbox: { limit: 3, burst: 3, window: 'minute', shared: true },
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

  const send = async (method: string, path: string, secret: string) => {
    const r = await fetch(`${t.url}${path}`, { method, headers: bearer(secret) });
    await r.text();
    return r.status;
  };

  it('a key lacking the write scope: 3 POSTs are 403 (its burst), the 17 after them 429', async () => {
    clock.set(T0);
    const { secret } = await t.gw.keys.create(
      {
        label: 'reader-only',
        environment: 'production',
        scopes: ['payments:read'],
        rate_limit: { limit: 3, burst: 3, window: 'minute' },
      },
      'production',
    );
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push(await send('POST', '/pay/charge', secret));
    // Its bucket holds 3 tokens and the clock does not move: a limit must show by the 4th request.
    expect(statuses.slice(0, 3)).toEqual([403, 403, 403]);
    expect(new Set(statuses.slice(3))).toEqual(new Set([429]));
  });

  it('a /v2 call the key lacks the scope for: 3 are 403, the 17 after them 429', async () => {
    clock.set(T0 + 3_600_000);
    const { secret } = await t.gw.keys.create(
      {
        label: 'wakes-reader',
        environment: 'production',
        scopes: ['wakes:read'],
        rate_limit: { limit: 3, burst: 3, window: 'minute' },
      },
      'production',
    );
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push(await send('GET', '/v2/api-keys', secret));
    expect(statuses.slice(0, 3)).toEqual([403, 403, 403]);
    expect(new Set(statuses.slice(3))).toEqual(new Set([429]));
  });

  it('a sandbox key on a route with no sandbox origin: 3 are 404 (the shared burst), the 17 after them 429', async () => {
    clock.set(T0 + 2 * 3_600_000);
    const { key, secret } = await t.gw.keys.create(
      { label: 'sandboxed', environment: 'sandbox', scopes: ['payments:read'] },
      'sandbox',
    );
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push(await send('GET', '/pay/x', secret));
    await flushed(t.gw);
    expect(statuses.slice(0, 3)).toEqual([404, 404, 404]);
    expect(new Set(statuses.slice(3)), `wakes of ${key.id}`).toEqual(new Set([429]));
  });
});
