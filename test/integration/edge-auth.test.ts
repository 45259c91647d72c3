import http from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { newKeySecret } from '../../src/auth/secrets.js';
import { GATEWAY, spawnGateway } from '../helpers/child.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

describe('keys at the edge', () => {
  let prod: TestServer;
  let sandbox: TestServer;
  const hits = { prod: 0, sandbox: 0 };
  const seen: Record<string, string | undefined>[] = [];
  let t: TestGateway;

  const mkOrigin = (name: 'prod' | 'sandbox') =>
    startServer((req, res) => {
      hits[name]++;
      seen.push({
        origin: name,
        authorization: req.headers.authorization,
        key: req.headers['x-wakegate-key-id'] as string,
        consumer: req.headers['x-wakegate-consumer'] as string,
        env: req.headers['x-wakegate-environment'] as string,
      });
      res.end(name);
    });

  beforeAll(async () => {
    prod = await mkOrigin('prod');
    sandbox = await mkOrigin('sandbox');
    t = await startGateway({
      routes: [
        {
          name: 'payments',
          prefix: '/pay',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: prod.url, sandbox: sandbox.url },
        },
        {
          name: 'reports',
          prefix: '/reports',
          scopes: { read: 'reports:read', write: 'reports:write' },
          origins: { production: prod.url },
        },
        {
          name: 'maybe',
          prefix: '/maybe',
          auth: 'optional',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: prod.url },
        },
      ],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await prod.close();
    await sandbox.close();
  });

  const issue = async (env: string, scopes: string[], consumer?: string) =>
    (await t.gw.keys.create({ label: `k-${env}`, environment: env, scopes, ...(consumer ? { consumer } : {}) }, env))
      .secret;

  it('strips Authorization and adds the identity headers; the key environment picks the origin', async () => {
    const live = await issue('production', ['payments:read'], 'acme');
    const test = await issue('sandbox', ['payments:read']);
    seen.length = 0;
    expect(await (await fetch(`${t.url}/pay/1`, { headers: bearer(live) })).text()).toBe('prod');
    expect(await (await fetch(`${t.url}/pay/1`, { headers: bearer(test) })).text()).toBe('sandbox');
    expect(seen[0]).toMatchObject({ origin: 'prod', authorization: undefined, consumer: 'acme', env: 'production' });
    expect(seen[0]?.key).toMatch(/^key_/);
    expect(seen[1]).toMatchObject({ origin: 'sandbox', authorization: undefined, env: 'sandbox' });
  });

  it('never lets a sandbox key reach a production origin', async () => {
    const test = await issue('sandbox', ['reports:read', 'payments:read']);
    const before = hits.prod;
    const r = await fetch(`${t.url}/reports/daily`, { headers: bearer(test) });
    expect(r.status).toBe(404);
    expect((await r.json()).error.type).toBe('resource_missing');
    expect((await fetch(`${t.url}/pay/x`, { headers: bearer(test) })).status).toBe(200);
    expect(hits.prod).toBe(before);
  });

  it('checks the read scope for GET/HEAD/OPTIONS and the write scope for the rest, naming the scope', async () => {
    const reader = await issue('production', ['payments:read']);
    expect((await fetch(`${t.url}/pay/1`, { headers: bearer(reader) })).status).toBe(200);
    expect((await fetch(`${t.url}/pay/1`, { method: 'HEAD', headers: bearer(reader) })).status).toBe(200);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const r = await fetch(`${t.url}/pay/1`, { method, headers: bearer(reader) });
      expect(r.status, method).toBe(403);
      const e = (await r.json()).error;
      expect(e).toMatchObject({ type: 'insufficient_scope', message: 'this key lacks the scope payments:write' });
    }
    // Scopes of one resource give nothing on another.
    expect((await fetch(`${t.url}/reports/x`, { headers: bearer(reader) })).status).toBe(403);
  });

  it('auth: optional forwards anonymous requests but still refuses a bad key', async () => {
    expect((await fetch(`${t.url}/maybe/x`)).status).toBe(200);
    expect((await fetch(`${t.url}/maybe/x`, { headers: bearer(newKeySecret('live')) })).status).toBe(401);
  });

  it('answers malformed Authorization headers with 401 authentication_required', async () => {
    const good = await issue('production', ['payments:read']);
    const u = new URL(t.url);
    const send = (auth: string | Buffer | undefined) =>
      new Promise<{ status: number; body: string; www: string | undefined }>((resolve, reject) => {
        const headers: Record<string, string | Buffer> = {};
        if (auth !== undefined) headers.authorization = auth;
        const req = http.request(
          { host: u.hostname, port: u.port, path: '/pay/1', headers: headers as http.OutgoingHttpHeaders },
          (res) => {
            let body = '';
            res.on('data', (c) => {
              body += c;
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body, www: res.headers['www-authenticate'] }));
          },
        );
        req.on('error', reject);
        req.end();
      });
    for (const h of [
      'Bearer',
      'Bearer ',
      `Basic ${good}`,
      `Token ${good}`,
      `Bearer ${'x'.repeat(10_240)}`,
      `Bearer ${good.slice(0, -1)}é`,
      `Bearer ${good}, Bearer ${good}`,
      '',
    ]) {
      const r = await send(h);
      expect(r.status, h.slice(0, 20)).toBe(401);
      expect(JSON.parse(r.body).error.type).toBe('authentication_required');
      expect(r.www).toBe('Bearer');
    }
    expect((await send(undefined)).status).toBe(401);
    for (const h of [`bearer ${good}`, `BEARER ${good}`, `Bearer   ${good}`])
      expect((await send(h)).status, h.slice(0, 9)).toBe(200);
  });

  it('refuses WebSocket upgrades by the same rules as requests, recording the key it knew', async () => {
    const { key, secret } = await t.gw.keys.create(
      { label: 'ws', environment: 'production', scopes: ['reports:read'] },
      'production',
    );
    const handshake = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(`${t.url.replace('http', 'ws')}/pay/stream`, { headers });
        ws.on('unexpected-response', (_req, res) => {
          resolve(res.statusCode ?? 0);
          res.resume();
          ws.terminate();
        });
        ws.on('open', () => reject(new Error('upgrade was not refused')));
        ws.on('error', () => {});
      });
    expect(await handshake({})).toBe(401);
    expect(await handshake(bearer(secret))).toBe(403);
    await flushed(t.gw);
    const mine = await t.gw.wakes.list({ environment: 'production', keyId: key.id }, 10, null);
    expect(mine.rows.map((w) => [w.path, w.status])).toEqual([['/pay/stream', 403]]);
  });

  it('answers a flood of unknown keys from memory, without touching storage', async () => {
    const client = t.gw.store.client;
    let queries = 0;
    const orig = client.query.bind(client);
    client.query = ((...args: Parameters<typeof client.query>) => {
      // Background pollers run regardless; a key lookup would read the key tables outside the poll.
      const q = args[0].query;
      if (/api_keys|key_usage/.test(q) && !q.includes('updated_at >= fromUnixTimestamp64Milli')) queries++;
      return orig(...args);
    }) as typeof client.query;
    try {
      const rs = await Promise.all(
        Array.from({ length: 300 }, () => fetch(`${t.url}/pay/1`, { headers: bearer(newKeySecret('live')) })),
      );
      expect(rs.every((r) => r.status === 401)).toBe(true);
      expect(queries).toBe(0);
    } finally {
      client.query = orig;
    }
  });

  it('a revocation on one instance reaches another sharing the store within 2 s', async () => {
    const other = await startGateway(
      {
        routes: [
          {
            name: 'payments',
            prefix: '/pay',
            scopes: { read: 'payments:read', write: 'payments:write' },
            origins: { production: prod.url },
          },
        ],
        storage: { key_poll_interval_ms: 1000 },
      },
      { dir: t.dir, admin: t.admin },
    );
    try {
      const secret = await issue('production', ['payments:read']);
      const id = t.gw.ring.bySecret(secret)?.id as string;
      // The other instance learns of the new key by the poll too.
      const deadline1 = Date.now() + 2000;
      while ((await fetch(`${other.url}/pay/1`, { headers: bearer(secret) })).status !== 200) {
        expect(Date.now()).toBeLessThan(deadline1);
        await new Promise((r) => setTimeout(r, 50));
      }
      const revokedAt = Date.now();
      const d = await fetch(`${t.url}/v2/api-keys/${id}`, { method: 'DELETE', headers: bearer(t.admin) });
      expect(d.status).toBe(200);
      expect((await fetch(`${t.url}/pay/1`, { headers: bearer(secret) })).status).toBe(401);
      let status = 200;
      while (status !== 401 && Date.now() - revokedAt < 2000) {
        status = (await fetch(`${other.url}/pay/1`, { headers: bearer(secret) })).status;
        if (status !== 401) await new Promise((r) => setTimeout(r, 50));
      }
      expect(status).toBe(401);
      expect(Date.now() - revokedAt).toBeLessThan(2000);
    } finally {
      await other.stop();
    }
  });

  it('the CLI (--offline) issues a key straight into the store and prints the secret once', async () => {
    const { execFile } = await import('node:child_process');
    const dir = join(t.dir, 'cli');
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        [
          ...GATEWAY,
          'keys',
          'create',
          '--offline',
          '--json',
          '--label',
          'ci',
          '--environment',
          'sandbox',
          '--scopes',
          'wakes:read,keys:read',
        ],
        { env: { PATH: process.env.PATH ?? '', DATA_DIR: dir } },
        (err, stdout, stderr) => (err ? reject(new Error(stderr)) : resolve(stdout)),
      ),
    );
    const k = JSON.parse(out);
    expect(k).toMatchObject({
      object: 'api_key',
      label: 'ci',
      environment: 'sandbox',
      scopes: ['wakes:read', 'keys:read'],
    });
    expect(k.secret).toMatch(/^svc_test_[0-9A-Za-z]{43}$/);
    const g = await spawnGateway(['serve'], {
      DATA_DIR: dir,
      ORIGIN_URL: prod.url,
      WAKEGATE_ADMIN_KEY: newKeySecret('live'),
    });
    try {
      const r = await fetch(`${g.url}/v2/api-keys/${k.id}`, { headers: bearer(k.secret) });
      expect(r.status).toBe(200);
      expect((await r.json()).secret).toBeUndefined();
    } finally {
      g.proc.kill('SIGTERM');
      await g.exited;
    }
  }, 60_000);
});
