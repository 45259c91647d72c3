import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/** Issue #25, items 4 and 5: no key, and no replay, acts beyond what it was given. */
describe('keys and replays act only within themselves', () => {
  let origin: TestServer;
  let t: TestGateway;
  const seen: { method: string; url: string; headers: Record<string, unknown> }[] = [];

  const api = (secret: string, method: string, path: string, body?: unknown) => call(t.url, secret, method, path, body);
  const issue = async (secret: string, body: Record<string, unknown>) =>
    api(secret, 'POST', '/v2/api-keys', { label: 'k', environment: 'production', ...body });

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    t = await startGateway({
      routes: [
        {
          name: 'orders',
          prefix: '/api',
          scopes: { read: 'api:read', write: 'api:write' },
          origins: { production: origin.url },
        },
      ],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('a keys:write key limited by `reports` cannot raise a limit, replace the admin key, or mint the admin consumer', async () => {
    const mid = await issue(t.admin, { scopes: ['keys:write', 'keys:read', 'api:read'], rate_limit: 'reports' });
    expect(mid.status).toBe(201);
    const s = mid.body.secret as string;
    const fast = await issue(s, { scopes: ['api:read'], rate_limit: { limit: 1e9, burst: 1e9, window: 'second' } });
    expect(fast.status).toBe(403);
    expect(fast.body.error).toMatchObject({ type: 'insufficient_scope', param: 'rate_limit' });
    // Its own limit or less is fine.
    expect((await issue(s, { scopes: ['api:read'], rate_limit: 'reports' })).status).toBe(201);
    const adminId = (await api(t.admin, 'GET', '/v2/api-keys?consumer=admin')).body.data[0].id as string;
    const replace = await issue(s, { scopes: ['api:read'], rate_limit: 'reports', replaces: adminId });
    expect(replace.status).toBe(403);
    expect(replace.body.error.param).toBe('replaces');
    const revoke = await api(s, 'DELETE', `/v2/api-keys/${adminId}`, { revoke_at: '2099-01-01T00:00:00Z' });
    expect(revoke.status).toBe(403);
    const admin = await issue(s, { scopes: ['api:read'], rate_limit: 'reports', consumer: 'admin' });
    expect(admin.status).toBe(403);
    expect(admin.body.error.param).toBe('consumer');
    // Named "admin" and no consumer given: the label would become the consumer.
    expect((await issue(s, { label: 'admin', scopes: ['api:read'], rate_limit: 'reports' })).status).toBe(403);
    // The admin key still works.
    expect((await api(t.admin, 'GET', '/v2/api-keys')).status).toBe(200);
  });

  it('property: whatever a key asks for, the key it gets can do nothing the asking key cannot', async () => {
    const caller = await issue(t.admin, {
      scopes: ['keys:write', 'api:read', 'wakes:read'],
      rate_limit: { limit: 100, burst: 50, window: 'minute' },
    });
    const s = caller.body.secret as string;
    const scopes = fc.subarray(['keys:write', 'keys:read', 'api:read', 'api:write', 'wakes:read', 'wakes:write'], {
      minLength: 1,
    });
    const limit = fc.oneof(
      fc.constant(undefined),
      fc.constantFrom('reports', 'default'),
      fc.record({
        limit: fc.integer({ min: 1, max: 10_000 }),
        burst: fc.integer({ min: 1, max: 200 }),
        window: fc.constantFrom('second', 'minute', 'hour'),
      }),
    );
    const consumer = fc.oneof(fc.constant(undefined), fc.constantFrom('admin', 'k', 'someone'));
    const perSecond = { second: 1, minute: 60, hour: 3600 } as Record<string, number>;
    await fc.assert(
      fc.asyncProperty(scopes, limit, consumer, async (sc, rl, co) => {
        const r = await issue(s, { scopes: sc, ...(rl ? { rate_limit: rl } : {}), ...(co ? { consumer: co } : {}) });
        if (r.status !== 201) {
          expect(r.status).toBe(403);
          return;
        }
        const k = r.body;
        expect(k.scopes.every((x: string) => ['keys:write', 'api:read', 'wakes:read'].includes(x))).toBe(true);
        const own = k.rate_limit ?? { limit: 6000, burst: 9000, window: 'minute' };
        expect(own.limit / (perSecond[own.window] as number)).toBeLessThanOrEqual(100 / 60);
        expect(own.burst).toBeLessThanOrEqual(50);
        expect(k.consumer).not.toBe('admin');
      }),
      { numRuns: 40 },
    );
  });

  it("a wakes:write key cannot replay another consumer's POST it could not send itself; a replay says who replayed it", async () => {
    const buyer = (await issue(t.admin, { label: 'buyer', scopes: ['api:read', 'api:write'] })).body.secret as string;
    const r = await fetch(`${t.url}/api/orders`, {
      method: 'POST',
      headers: { ...bearer(buyer), 'content-type': 'application/json' },
      body: '{"qty":1}',
    });
    const wakeId = r.headers.get('x-wake-id') as string;
    await r.arrayBuffer();
    await flushed(t.gw);
    const ops = (await issue(t.admin, { label: 'ops', scopes: ['wakes:read', 'wakes:write'] })).body;
    const before = seen.length;
    const refused = await api(ops.secret, 'POST', `/v2/wakes/${wakeId}/replay`, { allow_unsafe: true });
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toContain('api:write');
    expect(seen.length).toBe(before);
    // A key that could send it replays it, charged as its own request and named.
    const writer = (await issue(t.admin, { label: 'w', scopes: ['wakes:write', 'api:write'] })).body;
    const ok = await api(writer.secret, 'POST', `/v2/wakes/${wakeId}/replay`, { allow_unsafe: true });
    expect(ok.status).toBe(202);
    await expect.poll(() => seen.length, { timeout: 5000 }).toBe(before + 1);
    expect(seen.at(-1)?.headers['x-wakegate-replayed-by']).toBe(writer.id);
    expect(seen.at(-1)?.headers['x-wakegate-replay-of']).toBe(wakeId);
  });

  it('property: a replay is accepted exactly when the replaying key could send the original request itself', async () => {
    const buyer = (await issue(t.admin, { label: 'p-buyer', scopes: ['api:read', 'api:write'] })).body.secret as string;
    const wakes: Record<string, string> = {};
    for (const method of ['GET', 'POST']) {
      const r = await fetch(`${t.url}/api/p`, {
        method,
        headers: bearer(buyer),
        body: method === 'POST' ? '{}' : null,
      });
      wakes[method] = r.headers.get('x-wake-id') as string;
      await r.arrayBuffer();
    }
    await flushed(t.gw);
    const extra = fc.subarray(['api:read', 'api:write', 'wakes:read'], { minLength: 0 });
    await fc.assert(
      fc.asyncProperty(extra, fc.constantFrom('GET', 'POST'), async (scopes, method) => {
        const k = (await issue(t.admin, { label: 'p', scopes: ['wakes:write', ...scopes] })).body;
        const before = seen.length;
        const r = await api(k.secret, 'POST', `/v2/wakes/${wakes[method]}/replay`, { allow_unsafe: true });
        const needed = method === 'GET' ? 'api:read' : 'api:write';
        if (scopes.includes(needed)) {
          expect(r.status).toBe(202);
          await expect.poll(() => seen.length, { timeout: 5000 }).toBe(before + 1);
          expect(seen.at(-1)?.headers['x-wakegate-replayed-by']).toBe(k.id);
        } else {
          expect(r.status).toBe(403);
          expect(r.body.error.type).toBe('insufficient_scope');
          expect(seen.length).toBe(before);
        }
      }),
      { numRuns: 16 },
    );
  });

  it("refuses to replay a revoked key's wake, and a wake whose path was cut (409)", async () => {
    const gone = (await issue(t.admin, { label: 'gone', scopes: ['api:read'] })).body;
    const r = await fetch(`${t.url}/api/x`, { headers: bearer(gone.secret) });
    const wakeId = r.headers.get('x-wake-id') as string;
    await r.arrayBuffer();
    const long = await fetch(`${t.url}/api/${'a'.repeat(3000)}`, { headers: bearer(gone.secret) });
    const longId = long.headers.get('x-wake-id') as string;
    await long.arrayBuffer();
    await flushed(t.gw);
    const cut = await api(t.admin, 'POST', `/v2/wakes/${longId}/replay`, {});
    expect(cut.status).toBe(409);
    expect(cut.body.error.message).toMatch(/path was cut/);
    expect((await api(t.admin, 'DELETE', `/v2/api-keys/${gone.id}`)).status).toBe(200);
    const revoked = await api(t.admin, 'POST', `/v2/wakes/${wakeId}/replay`, {});
    expect(revoked.status).toBe(409);
    expect(revoked.body.error.message).toMatch(/revoked/);
  });
});
