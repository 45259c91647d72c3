import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Regression tests from a review of the product against its design contract (2026-11-27).

/**
 * Fixed: a replay call takes no token as a /v2 call; its own admission charges it once (a refused one: one token of its own bucket).
 * DESIGN, One admission: "A proxied request, a `/v2` call and a replay pass the same
 * admission, written once ... The three entry points differ only in what they do with an
 * admitted request." Wake detail and replay: the replaying key "is charged to its own
 * bucket". Rate limits: "All or nothing: a rejected request takes no token", and
 * `x-ratelimit-remaining` is "whole tokens left".
 *
 * What the product does instead: a replay call is admitted twice against the same key
 * bucket (once as a /v2 call, once as the replay), so
 *  - a key whose bucket holds one token can never replay: 429 with a full bucket, and the
 *    refused call still spent the token (the next call says r=0, reset 3600);
 *  - a key with three tokens gets one replay; the 202 says `x-ratelimit-remaining: 2`
 *    while only one token is left, and the second replay call is refused yet spends it.
 */
describe('a replay is admitted once and charges the replaying key once', () => {
  let t: TestGateway;
  let origin: TestServer;
  let hits = 0;
  let wakeId = '';

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        hits++;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    t = await startGateway({
      routes: [
        {
          name: 'api',
          prefix: '/api',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url },
        },
      ],
    });
    const user = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'user',
      environment: 'production',
      scopes: ['payments:read'],
    });
    const r = await fetch(`${t.url}/api/items`, { headers: bearer(user.body.secret) });
    await r.arrayBuffer();
    wakeId = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const replayer = async (label: string, burst: number) =>
    (
      await call(t.url, t.admin, 'POST', '/v2/api-keys', {
        label,
        environment: 'production',
        scopes: ['wakes:write', 'payments:read'],
        rate_limit: { limit: burst, burst, window: 'hour' },
      })
    ).body.secret as string;

  const replay = (secret: string, id = wakeId) =>
    fetch(`${t.url}/v2/wakes/${id}/replay`, {
      method: 'POST',
      headers: { ...bearer(secret), 'content-type': 'application/json' },
      body: '{}',
    });

  it('a key with one token left replays (202), and the origin gets the replay', async () => {
    const secret = await replayer('one-token', 1);
    const before = hits;
    const r = await replay(secret);
    const body = await r.json();
    // Today: 429 rate_limit_exceeded, retry_after 3600, although the bucket was full.
    expect(r.status, JSON.stringify(body)).toBe(202);
    await expect.poll(() => hits - before, { timeout: 3000 }).toBe(1);
  });

  it('the 202 of a replay tells the tokens truly left (x-ratelimit-remaining)', async () => {
    const secret = await replayer('three-tokens', 3);
    const first = await replay(secret);
    await first.arrayBuffer();
    expect(first.status).toBe(202);
    const remaining = Number(first.headers.get('x-ratelimit-remaining'));
    // Spend exactly what the 202 said was left, with requests the key may send itself.
    const after: number[] = [];
    for (let i = 0; i < remaining; i++) {
      const r = await fetch(`${t.url}/api/items`, { headers: bearer(secret) });
      await r.arrayBuffer();
      after.push(r.status);
    }
    // Today the 202 says 2, but one token is left: [200, 429].
    expect(after).toEqual(Array(remaining).fill(200));
  });
  it('a replay over the bucket is 429 with the headers, nothing sent; a refused replay call takes one token', async () => {
    const secret = await replayer('refusals', 2);
    // Refused before its admission (no such wake): one token taken, told in its headers.
    const missing = await replay(secret, 'wk_0000000000000000000000');
    await missing.arrayBuffer();
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-ratelimit-remaining')).toBe('1');
    const before = hits;
    const first = await replay(secret);
    await first.arrayBuffer();
    expect(first.status).toBe(202);
    expect(first.headers.get('x-ratelimit-remaining')).toBe('0');
    const second = await replay(secret);
    const body = (await second.json()) as { error: { type: string } };
    expect(second.status).toBe(429);
    expect(body.error.type).toBe('rate_limit_exceeded');
    expect(second.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0);
    await expect.poll(() => hits - before, { timeout: 3000 }).toBe(1);
    await new Promise((r) => setTimeout(r, 200));
    expect(hits - before).toBe(1);
  });
});
