import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKeySecret } from '../../src/auth/secrets.js';
import { createLogger } from '../../src/log.js';
import { EventTable } from '../../src/store/events.js';
import { KeyTable } from '../../src/store/keys.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

/** Issue #36 (Keys and replay): one bootstrap admin key, and an admin key may set any limit. */
describe('the bootstrap admin key', () => {
  let origin: TestServer;
  let dir: string;
  const lines: string[] = [];
  const log = createLogger('info', (l) => {
    lines.push(l);
  });
  const routes = [{ name: 'api', prefix: '/api', scopes: { read: 'api:read', write: 'api:write' } }];
  const start = (admin: string) =>
    startGateway(
      { routes: [{ ...routes[0], origins: { production: origin.url, sandbox: origin.url } }] },
      { dir, admin, log },
    );
  /** Every key as stored (latest version each), read through the gateway's own store. */
  const stored = async (t: TestGateway) =>
    (await new KeyTable(t.gw.store).changedSince(0)).sort((x, y) => (x.id < y.id ? -1 : 1));
  const activeBootstrap = async (t: TestGateway) =>
    (await stored(t)).filter((k) => k.bootstrap === true && k.revoked_at === null);

  beforeAll(async () => {
    origin = await echoOrigin('prod');
    dir = mkdtempSync(join(tmpdir(), 'wakegate-boot-'));
  });
  afterAll(async () => {
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a new WAKEGATE_ADMIN_KEY replaces the old one (revoked, key.rotated, one log line); the same one again changes nothing', async () => {
    const a = newKeySecret('live');
    const b = newKeySecret('live');
    let t = await start(a);
    const first = await activeBootstrap(t);
    expect(first).toHaveLength(1);
    const aId = first[0]?.id as string;
    expect((await call(t.url, a, 'GET', '/v2/api-keys')).status).toBe(200);
    await t.stop();

    lines.length = 0;
    t = await start(b);
    const refused = await call(t.url, a, 'GET', '/v2/api-keys');
    expect(refused.status).toBe(401);
    expect(refused.body.error.type).toBe('key_revoked');
    const list = await call(t.url, b, 'GET', '/v2/api-keys');
    expect(list.status).toBe(200);
    const now = await activeBootstrap(t);
    expect(now).toHaveLength(1);
    const bId = now[0]?.id as string;
    expect(bId).not.toBe(aId);
    expect(now[0]?.replaces).toBe(aId);
    // The admin keys an operator sees: one active.
    const admins = list.body.data.filter((k: { consumer: string }) => k.consumer === 'admin');
    expect(
      admins.filter((k: { revoked_at: string | null }) => k.revoked_at === null).map((k: { id: string }) => k.id),
    ).toEqual([bId]);
    await t.gw.events.flush();
    const rotated = await new EventTable(t.gw.store).list({ type: 'key.rotated' });
    expect(rotated).toHaveLength(1);
    expect(rotated[0]?.data).toMatchObject({ key: { id: bId, replaces: aId }, replaces: { id: aId } });
    expect(rotated[0]?.data.replaces).toMatchObject({ revoked_at: expect.any(String) });
    const revoked = await new EventTable(t.gw.store).list({ type: 'key.revoked' });
    expect(revoked.map((e) => (e.data.key as { id: string }).id)).toEqual([aId]);
    // One log line names the rotation; no line holds either secret.
    const rot = lines.filter((l) => l.includes('bootstrap admin key rotated'));
    expect(rot).toHaveLength(1);
    expect(JSON.parse(rot[0] as string)).toMatchObject({ key_id: bId, replaces: [aId] });
    expect(lines.some((l) => l.includes('bootstrap admin key installed'))).toBe(false);
    for (const l of lines) {
      expect(l).not.toContain(a);
      expect(l).not.toContain(b);
    }
    const before = await stored(t);
    await t.stop();

    // The same variable again: nothing changes, no event, no line.
    lines.length = 0;
    t = await start(b);
    expect(await stored(t)).toEqual(before);
    expect((await activeBootstrap(t)).map((k) => k.id)).toEqual([bId]);
    await t.gw.events.flush();
    expect(await new EventTable(t.gw.store).list({ type: 'key.rotated' })).toHaveLength(1);
    expect(lines.filter((l) => l.includes('bootstrap admin key'))).toEqual([]);
    expect((await call(t.url, b, 'GET', '/v2/api-keys')).status).toBe(200);
    await t.stop();
  }, 120_000);

  it('a store from before the marker: the piled-up admin keys are all revoked by the next new variable', async () => {
    const d = mkdtempSync(join(tmpdir(), 'wakegate-boot-old-'));
    try {
      const a = newKeySecret('live');
      let t = await startGateway({}, { dir: d, admin: a });
      // Make the store look as an earlier version left it: two admin keys, neither marked.
      const table = new KeyTable(t.gw.store);
      const [own] = await stored(t);
      if (!own) throw new Error('no bootstrap key');
      await table.put({ ...own, bootstrap: false, updated_at: own.updated_at + 1 });
      await table.put({ ...own, id: 'key_legacy2', secret_hash: 'x'.repeat(64), bootstrap: false });
      await t.stop();
      const c = newKeySecret('live');
      t = await startGateway({}, { dir: d, admin: c });
      try {
        expect((await call(t.url, a, 'GET', '/v2/api-keys')).status).toBe(401);
        expect((await call(t.url, c, 'GET', '/v2/api-keys')).status).toBe(200);
        const keys = await stored(t);
        const active = keys.filter((k) => k.revoked_at === null);
        expect(active).toHaveLength(1);
        expect(active[0]?.bootstrap).toBe(true);
        expect(keys.find((k) => k.id === 'key_legacy2')?.revoked_at).not.toBeNull();
      } finally {
        await t.stop();
      }
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('the bootstrap admin key of the gateway as a process', () => {
  it('a restart with a new WAKEGATE_ADMIN_KEY writes one line naming both ids and neither secret', async () => {
    const origin = await echoOrigin('prod');
    const d = mkdtempSync(join(tmpdir(), 'wakegate-boot-child-'));
    const run = (admin: string) =>
      spawnGateway(['serve'], { DATA_DIR: join(d, 'data'), ORIGIN_URL: origin.url, WAKEGATE_ADMIN_KEY: admin });
    const stop = async (g: ChildGateway) => {
      g.proc.kill('SIGTERM');
      expect(await g.exited, g.stderr()).toEqual({ code: 0, signal: null });
    };
    try {
      const a = newKeySecret('live');
      const b = newKeySecret('live');
      const g1 = await run(a);
      const aId = (await call(g1.url, a, 'GET', '/v2/api-keys')).body.data[0].id as string;
      await stop(g1);
      const g2 = await run(b);
      try {
        expect((await call(g2.url, a, 'GET', '/v2/api-keys')).body.error?.type).toBe('key_revoked');
        const keys = (await call(g2.url, b, 'GET', '/v2/api-keys')).body.data as { id: string; revoked_at: unknown }[];
        const active = keys.filter((k) => k.revoked_at === null);
        expect(active).toHaveLength(1);
        const out = g2.stderr() + g2.stdout();
        const lines = out.split('\n').filter((l) => l.includes('bootstrap admin key'));
        expect(lines).toHaveLength(1);
        expect(JSON.parse(lines[0] as string)).toMatchObject({
          msg: 'bootstrap admin key rotated',
          key_id: active[0]?.id,
          replaces: [aId],
        });
        expect(out).not.toContain(a);
        expect(out).not.toContain(b);
      } finally {
        await stop(g2);
      }
    } finally {
      await origin.close();
      rmSync(d, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('an admin key may set any rate limit (DESIGN, The /v2 API)', () => {
  let origin: TestServer;
  let t: TestGateway;
  const issue = (secret: string, body: Record<string, unknown>) =>
    call(t.url, secret, 'POST', '/v2/api-keys', { label: 'k', environment: 'production', ...body });
  const partner = { limit: 100_000, burst: 100_000, window: 'minute' };

  beforeAll(async () => {
    origin = await echoOrigin('prod');
    t = await startGateway({
      routes: [
        {
          name: 'api',
          prefix: '/api',
          scopes: { read: 'api:read', write: 'api:write' },
          origins: { production: origin.url, sandbox: origin.url },
        },
      ],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('the bootstrap admin (no rate_limit of its own) issues a 100,000/minute partner key and can rotate and revoke it', async () => {
    const r = await issue(t.admin, { label: 'partner', scopes: ['api:read'], rate_limit: partner });
    expect(r.status).toBe(201);
    expect(r.body.rate_limit).toEqual(partner);
    const listed = await call(t.url, t.admin, 'GET', `/v2/api-keys/${r.body.id}`);
    expect(listed.body.rate_limit).toEqual(partner);
    // The admin can manage what it issued: rotate it and revoke it.
    const next = await issue(t.admin, { label: 'partner 2', scopes: ['api:read'], replaces: r.body.id });
    expect(next.status).toBe(201);
    expect(next.body.rate_limit).toEqual(partner);
    expect((await call(t.url, t.admin, 'DELETE', `/v2/api-keys/${r.body.id}`)).status).toBe(200);
  });

  it('any admin key (all six management scopes, live class) may; a keys:write key, or an admin-shaped key of a test-class environment, may not exceed its own', async () => {
    const six = ['wakes:read', 'wakes:write', 'keys:read', 'keys:write', 'webhooks:read', 'webhooks:write'];
    const admin2 = await issue(t.admin, { label: 'second admin', scopes: [...six, 'api:read'], rate_limit: 'reports' });
    expect(admin2.status).toBe(201);
    expect((await issue(admin2.body.secret, { scopes: ['api:read'], rate_limit: partner })).status).toBe(201);

    const writer = await issue(t.admin, { label: 'writer', scopes: ['keys:write', 'api:read'], rate_limit: 'reports' });
    const over = await issue(writer.body.secret, { scopes: ['api:read'], rate_limit: partner });
    expect(over.status).toBe(403);
    expect(over.body.error).toMatchObject({ type: 'insufficient_scope', param: 'rate_limit' });
    // Nor may it revoke the partner key the admin made.
    const p = await issue(t.admin, { label: 'p3', scopes: ['api:read'], rate_limit: partner });
    expect((await call(t.url, writer.body.secret, 'DELETE', `/v2/api-keys/${p.body.id}`)).status).toBe(403);

    const sandboxAdmin = await issue(t.admin, {
      label: 'sandbox six',
      environment: 'sandbox',
      scopes: [...six, 'api:read'],
      rate_limit: 'reports',
    });
    expect(sandboxAdmin.status).toBe(201);
    const sb = await call(t.url, sandboxAdmin.body.secret, 'POST', '/v2/api-keys', {
      label: 'sb',
      environment: 'sandbox',
      scopes: ['api:read'],
      rate_limit: partner,
    });
    expect(sb.status, JSON.stringify(sb.body)).toBe(403);
    expect(sb.body.error.param).toBe('rate_limit');
  });
});
