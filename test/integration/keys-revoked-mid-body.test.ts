// Regression tests from a review of the key lifecycle (2026-11-28).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * SPEC: a revoked key gets 401 key_revoked on any request; a revocation takes effect at
 * once on this instance (docs/keys-and-limits.md: "the very next request ... gets 401").
 * A /v2 call is admitted (key checked) in the onRequest hook, before its body is read, and
 * the handler then acts with the KeyRecord admitted then. A leaked key whose POST
 * /v2/api-keys body is still arriving when the operator revokes it (leak response: DELETE
 * at once, 200) still issues a fresh key afterwards: the revoked key mints a working key.
 */
describe('a key revoked while its create call is mid-body', () => {
  let t: TestGateway;
  const clock = new ManualClock(Date.UTC(2026, 10, 28, 12, 0, 0));
  beforeAll(async () => {
    t = await startGateway({}, { clock });
  });
  afterAll(async () => t?.cleanup());

  const slowCall = (base: string, secret: string, method: string, path: string, body: string) => {
    const u = new URL(base);
    const sock = net.connect(Number(u.port), u.hostname);
    let text = '';
    sock.on('data', (d) => {
      text += d.toString('utf8');
    });
    const done = new Promise<string>((resolve) => sock.on('close', () => resolve(text)));
    sock.on('error', () => {});
    const head =
      `${method} ${path} HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${secret}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
    const cut = Math.floor(body.length / 2);
    sock.write(head + body.slice(0, cut));
    return { finish: () => sock.write(body.slice(cut)), done };
  };

  for (const where of ['managementUrl', 'url'] as const) {
    it(`on ${where}: the create finished after the DELETE answered is refused, and no key is issued`, async () => {
      const base = t[where];
      const mgr = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
        label: `leaked-${where}`,
        environment: 'production',
        scopes: ['keys:write', 'keys:read', 'wakes:read'],
      });
      expect(mgr.status).toBe(201);
      const body = JSON.stringify({ label: `minted-${where}`, environment: 'production', scopes: ['wakes:read'] });
      const pending = slowCall(base, mgr.body.secret, 'POST', '/v2/api-keys', body);
      await new Promise((r) => setTimeout(r, 300));
      // Leak response: revoke at once.
      const del = await call(t.url, t.admin, 'DELETE', `/v2/api-keys/${mgr.body.id}`);
      expect(del.status).toBe(200);
      expect(del.body.revoked_at).not.toBeNull();
      // The revoked key is refused from now on...
      const again = await call(t.url, mgr.body.secret, 'GET', '/v2/api-keys');
      expect(again.status).toBe(401);
      // ...so the rest of its call's body must not issue a key.
      pending.finish();
      const text = await pending.done;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
      const list = await call(t.url, t.admin, 'GET', `/v2/api-keys?label=minted-${where}`);
      expect({ status, minted: list.body.data.length }, text.slice(0, 400)).toEqual({ status: 401, minted: 0 });
    }, 20_000);
  }

  it('on managementUrl: a scheduled revocation that comes due mid-body refuses the create too', async () => {
    const mgr = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'scheduled-mgr',
      environment: 'production',
      scopes: ['keys:write', 'keys:read', 'wakes:read'],
    });
    expect(mgr.status).toBe(201);
    const due = clock.now() + 60_000;
    const d = await call(t.url, t.admin, 'DELETE', `/v2/api-keys/${mgr.body.id}`, {
      revoke_at: new Date(due).toISOString(),
    });
    expect(d.status).toBe(200);
    const body = JSON.stringify({ label: 'minted-after-due', environment: 'production', scopes: ['wakes:read'] });
    const pending = slowCall(t.managementUrl, mgr.body.secret, 'POST', '/v2/api-keys', body);
    await new Promise((r) => setTimeout(r, 300));
    clock.set(due + 1000);
    expect((await call(t.url, mgr.body.secret, 'GET', '/v2/api-keys')).status).toBe(401);
    pending.finish();
    const text = await pending.done;
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
    const list = await call(t.url, t.admin, 'GET', '/v2/api-keys?label=minted-after-due');
    expect({ status, minted: list.body.data.length }, text.slice(0, 400)).toEqual({ status: 401, minted: 0 });
  }, 20_000);
});
