import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Revocation cannot be undone, across a fleet too. Two instances share one storage;
 * one of them (B) has not read the other's latest writes yet (its key poll is long,
 * and there is no Redis to tell it). A writes a revocation; B, from what it read
 * before, writes another version of the same key (a scheduled revocation, a
 * certificate) stamped later. Storage keeps a key's newest version, so B's version,
 * which knew nothing of the revocation, replaced A's: every instance that read the
 * key from storage afterwards (a restart, a new instance, B itself) admitted the
 * revoked key again, until the scheduled instant or for ever.
 */

let origin: TestServer;
let storage: HttpStorage;
const admin = `svc_live_${newSecret()}`;
const gws: TestGateway[] = [];
/** One storage encryption key for the fleet. */
const encryptionKey = randomBytes(32).toString('base64');

const values = (pollMs: number) => ({
  storage: {
    clickhouse_url: storage.url,
    encryption_key: encryptionKey,
    key_poll_interval_ms: pollMs,
  },
  webhooks: { allow_insecure_http: true, allow_private_networks: true },
  routes: [
    {
      name: 'api',
      prefix: '/api',
      scopes: { read: 'api:read', write: 'api:write' },
      origins: { production: origin.url },
    },
  ],
});

beforeAll(async () => {
  [origin, storage] = await Promise.all([
    startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('{"ok":true}'));
    }),
    startHttpStorage(),
  ]);
}, 60_000);
afterAll(async () => {
  for (const g of gws) await g.cleanup();
  await Promise.all([origin?.close(), storage?.stop()]);
}, 60_000);

async function until(f: () => Promise<boolean>, what: string) {
  const deadline = Date.now() + 15_000;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const send = async (g: TestGateway, secret: string) => {
  const r = await fetch(`${g.url}/api/x`, { headers: { ...bearer(secret), connection: 'close' } });
  const body = (await r.json()) as { error?: { type?: string } };
  return { status: r.status, type: body.error?.type };
};

describe('a revocation on one instance survives a stale write of the same key on another', () => {
  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    // A reads storage often; B only once a minute (a fleet without Redis, or whose announcement was lost).
    a = await startGateway(values(200), { admin });
    gws.push(a);
    b = await startGateway(values(60_000), { admin });
    gws.push(b);
  }, 120_000);

  it.each([
    [
      'a scheduled revocation written from before it',
      (id: string) => ({
        method: 'DELETE',
        path: `/v2/api-keys/${id}`,
        body: { revoke_at: new Date(Date.now() + 86_400_000).toISOString() },
      }),
    ],
    [
      'a certificate set from before it',
      (id: string) => ({ method: 'PATCH', path: `/v2/api-keys/${id}`, body: { tls_fingerprint: 'ab'.repeat(32) } }),
    ],
  ])(
    'revoked now on A, then %s on B: every instance refuses the key, after a restart too',
    async (_, write) => {
      // The key is made on B, so B holds it; A reads it from storage.
      const made = await call(b.url, admin, 'POST', '/v2/api-keys', {
        environment: 'production',
        label: 'raced',
        scopes: ['api:read'],
      });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      const id = made.body.id as string;
      const secret = made.body.secret as string;
      await until(
        async () => (await call(a.url, admin, 'GET', `/v2/api-keys/${id}`)).status === 200,
        'A to read the key',
      );
      expect((await send(a, secret)).status).toBe(200);
      expect((await send(b, secret)).status).toBe(200);

      const revoked = await call(a.url, admin, 'DELETE', `/v2/api-keys/${id}`);
      expect(revoked.status).toBe(200);
      expect(revoked.body.revoked_at).not.toBeNull();
      // B has not read the revocation: it writes its own version of the key, stamped later.
      await new Promise((r) => setTimeout(r, 20));
      const w = write(id);
      const stale = await call(b.url, admin, w.method, w.path, w.body);
      expect(stale.status, JSON.stringify(stale.body)).toBe(200);

      // A new instance reads every key from storage: the key is revoked there.
      const c = await startGateway(values(200), { admin });
      gws.push(c);
      const got = await call(c.url, admin, 'GET', `/v2/api-keys/${id}`);
      expect(got.status).toBe(200);
      expect(got.body.revoked_at).toBe(revoked.body.revoked_at);
      expect(await send(c, secret)).toEqual({ status: 401, type: 'key_revoked' });
      expect(await send(a, secret)).toEqual({ status: 401, type: 'key_revoked' });
      await c.stop();
    },
    90_000,
  );
  it.each([
    ['its events changed', { events: ['wake.error'] }],
    ['disabled', { status: 'disabled' }],
  ])(
    'an endpoint deleted on A, then %s on B from before it: gone on every instance, after a restart too',
    async (_, change) => {
      const made = await call(b.url, admin, 'POST', '/v2/webhooks/endpoints', {
        url: 'http://127.0.0.1:9/hook',
        events: ['*'],
      });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      const id = made.body.id as string;
      await until(
        async () => (await call(a.url, admin, 'GET', `/v2/webhooks/endpoints/${id}`)).status === 200,
        'A to read the endpoint',
      );
      expect((await call(a.url, admin, 'DELETE', `/v2/webhooks/endpoints/${id}`)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 20));
      // B has not read the delete: it writes its own version of the endpoint, stamped later.
      const stale = await call(b.url, admin, 'PATCH', `/v2/webhooks/endpoints/${id}`, change);
      expect(stale.status, JSON.stringify(stale.body)).toBe(200);

      const c = await startGateway(values(200), { admin });
      gws.push(c);
      expect((await call(c.url, admin, 'GET', `/v2/webhooks/endpoints/${id}`)).status).toBe(404);
      const listed = (await call(c.url, admin, 'GET', '/v2/webhooks/endpoints?limit=100')).body.data as {
        id: string;
      }[];
      expect(listed.map((e) => e.id)).not.toContain(id);
      expect((await call(a.url, admin, 'GET', `/v2/webhooks/endpoints/${id}`)).status).toBe(404);
      await c.stop();
    },
    90_000,
  );
});
