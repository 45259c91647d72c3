import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { KeyTable } from '../../src/store/keys.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { bearer, call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where the child gateway serves with two edge threads.

/**
 * A review's item: a WebSocket tunnel opened with a key stayed open after the key was
 * revoked (DELETE /v2/api-keys/{id}, a scheduled revocation coming due, or another
 * gateway's revocation read from storage), carrying traffic for as long as the client
 * liked. Revocation now cuts the tunnels that key opened, on every edge thread; other
 * keys' tunnels stay open, and the cut tunnel is one wake as any other.
 */

/** A WebSocket origin that echoes; an upgrade to /api/slow is held (no 101) until the test lets it go. */
async function wsOrigin(): Promise<TestServer & { held: net.Socket[] }> {
  const origin = await startServer((_req, res) => res.end('plain'));
  const wss = new WebSocketServer({ noServer: true });
  const held: net.Socket[] = [];
  origin.server.on('upgrade', (req: IncomingMessage, socket: net.Socket, head: Buffer) => {
    socket.on('error', () => {});
    if (req.url?.startsWith('/api/slow')) return void held.push(socket);
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('error', () => {});
      ws.on('message', (m, binary) => ws.send(m, { binary }));
    });
  });
  return Object.assign(origin, { held });
}

/** An open WebSocket through the gateway, and when it closed (performance.now(), or null while open). */
interface Tunnel {
  ws: WebSocket;
  closedAt: () => number | null;
  closed: Promise<number>;
}

/** Every tunnel a test opened: closed after it, whatever it asserted. */
const opened: WebSocket[] = [];

function openTunnel(url: string, secret: string): Promise<Tunnel> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: bearer(secret) });
    opened.push(ws);
    let at: number | null = null;
    const closed = new Promise<number>((r) =>
      ws.once('close', () => {
        at = performance.now();
        r(at);
      }),
    );
    const timer = setTimeout(() => reject(new Error('no tunnel within 5 s')), 5000);
    ws.once('open', () => {
      clearTimeout(timer);
      resolve({ ws, closedAt: () => at, closed });
    });
    ws.once('unexpected-response', (_req, res) => {
      clearTimeout(timer);
      reject(new Error(`upgrade answered ${res.statusCode}`));
    });
    ws.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

/** Resolves with the echo of `m`, or rejects after `ms`. */
function echo(t: Tunnel, m: string, ms = 3000): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no echo of ${m} within ${ms} ms`)), ms);
    const on = (data: WebSocket.RawData) => {
      if (data.toString() !== m) return;
      clearTimeout(timer);
      t.ws.off('message', on);
      resolve(m);
    };
    t.ws.on('message', on);
    t.ws.send(m);
  });
}

/** Resolves with when the tunnel closed, or rejects once `ms` have passed with it open. */
function closedWithin(t: Tunnel, ms: number): Promise<number> {
  return Promise.race([
    t.closed,
    new Promise<number>((_, reject) =>
      setTimeout(() => reject(new Error(`the tunnel was still open ${ms} ms later`)), ms).unref(),
    ),
  ]);
}

afterEach(() => {
  for (const ws of opened) ws.terminate();
  opened.length = 0;
});

describe('a revoked key loses its tunnels', () => {
  let origin: Awaited<ReturnType<typeof wsOrigin>>;
  let t: TestGateway;
  let wsBase: string;

  const issue = async (label: string) => {
    const r = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label,
      environment: 'production',
      scopes: ['api:read', 'api:write'],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body as { id: string; secret: string };
  };

  beforeAll(async () => {
    origin = await wsOrigin();
    t = await startGateway({
      routes: [
        {
          name: 'api',
          prefix: '/api',
          scopes: { read: 'api:read', write: 'api:write' },
          origins: { production: origin.url },
        },
      ],
    });
    wsBase = `${t.url.replace('http:', 'ws:')}/api`;
  });
  afterAll(async () => {
    for (const s of origin.held) s.destroy();
    await t.cleanup();
    await origin.close();
  });

  it('DELETE /v2/api-keys/{id} cuts that key’s tunnels at once; another key’s stays open; the wake is recorded', async () => {
    const [a, b] = [await issue('a'), await issue('b')];
    const a1 = await openTunnel(`${wsBase}/sock-a`, a.secret);
    const a2 = await openTunnel(`${wsBase}/sock-a`, a.secret);
    const b1 = await openTunnel(`${wsBase}/sock-b`, b.secret);
    for (const x of [a1, a2, b1]) await expect(echo(x, 'before')).resolves.toBe('before');
    expect(t.gw.tunnels.size).toBe(3);

    const r = await call(t.url, t.admin, 'DELETE', `/v2/api-keys/${a.id}`);
    expect(r.status).toBe(200);
    const answered = performance.now();
    // The cut follows the revocation's answer closely (events, bounded; no sleep).
    const [c1, c2] = await Promise.all([closedWithin(a1, 1000), closedWithin(a2, 1000)]);
    expect(Math.max(c1, c2) - answered).toBeLessThan(1000);
    // The other key's tunnel carries on.
    await expect(echo(b1, 'still here')).resolves.toBe('still here');
    expect(b1.closedAt()).toBeNull();
    await expect.poll(() => t.gw.tunnels.size, { timeout: 2000 }).toBe(1);
    // A new tunnel with the revoked key is refused.
    await expect(openTunnel(`${wsBase}/sock-a`, a.secret)).rejects.toThrow(/401/);

    await flushed(t.gw);
    const rows = (await t.gw.wakes.list({ environment: 'production', pathPattern: '^/api/sock-a$' }, 10, null)).rows;
    const tunnels = rows.filter((w) => w.status === 101);
    expect(tunnels).toHaveLength(2);
    for (const w of tunnels) {
      expect(w.key_id).toBe(a.id);
      expect(w.request_bytes).toBeGreaterThan(0);
    }
  });

  it('a scheduled revocation cuts them when it comes due, not before', async () => {
    const a = await issue('scheduled');
    const a1 = await openTunnel(`${wsBase}/sock-s`, a.secret);
    const due = Date.now() + 1200;
    const r = await call(t.url, t.admin, 'DELETE', `/v2/api-keys/${a.id}`, { revoke_at: new Date(due).toISOString() });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    await expect(echo(a1, 'not yet')).resolves.toBe('not yet');
    await closedWithin(a1, 1200 + 1500);
    expect(Date.now()).toBeGreaterThanOrEqual(due - 5);
  });

  it('a revocation written by another gateway (read from storage) cuts them too', async () => {
    const [a, b] = [await issue('peer-a'), await issue('peer-b')];
    const a1 = await openTunnel(`${wsBase}/sock-p`, a.secret);
    const b1 = await openTunnel(`${wsBase}/sock-p`, b.secret);
    // Another gateway on the same storage revokes it: this one learns it from the table, not its own API.
    const table = new KeyTable(t.gw.store);
    const held = (await table.get(a.id)) as NonNullable<Awaited<ReturnType<KeyTable['get']>>>;
    const now = Date.now();
    await table.put({ ...held, revoked_at: now, updated_at: Math.max(now, held.updated_at + 1) });
    await closedWithin(a1, 3000);
    await expect(echo(b1, 'peer')).resolves.toBe('peer');
  });

  it('a handshake still waiting for the origin when its key is revoked is answered 401 key_revoked', async () => {
    const a = await issue('handshake');
    origin.held.length = 0;
    await expect.poll(() => t.gw.tunnels.size, { timeout: 2000 }).toBe(0);
    const port = Number(new URL(t.url).port);
    const pending = rawExchange(
      port,
      `GET /api/slow HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer ${a.secret}\r\n\r\n`,
      5000,
    );
    await expect.poll(() => origin.held.length, { timeout: 3000 }).toBe(1);
    expect((await call(t.url, t.admin, 'DELETE', `/v2/api-keys/${a.id}`)).status).toBe(200);
    const r = await pending;
    expect(r.closed).toBe(true);
    expect(statusOf(r.text), r.text).toBe(401);
    expect(JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4)).error.type).toBe('key_revoked');
    await expect.poll(() => t.gw.tunnels.size, { timeout: 2000 }).toBe(0);
  });
});

/**
 * The gateway as a child process with two edge threads where the runtime has
 * SO_REUSEPORT (Node 26, scripts/test-on-lts.sh; one elsewhere): tunnels live on the
 * edge threads, which learn of the revocation from the control thread's key versions.
 */
describe('a revoked key loses its tunnels on every edge thread', () => {
  const admin = `svc_live_${newSecret()}`;
  let origin: Awaited<ReturnType<typeof wsOrigin>>;
  let dir: string;
  let g: ChildGateway;

  beforeAll(async () => {
    origin = await wsOrigin();
    dir = mkdtempSync(join(tmpdir(), 'wakegate-tunnel-revoke-'));
    writeFileSync(
      join(dir, 'cfg.yaml'),
      [
        'server: { threads: 2 }',
        'log: { level: info }',
        'capture: { flush_interval_ms: 50 }',
        'routes:',
        `  - { name: api, prefix: /api, scopes: { read: api:read, write: api:write }, origins: { production: ${origin.url} } }`,
        '',
      ].join('\n'),
    );
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: admin,
      WAKEGATE_TEST_HOOKS: '1',
    });
  }, 60_000);
  afterAll(async () => {
    if (g && g.proc.exitCode === null) g.proc.kill('SIGKILL');
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('every tunnel of the revoked key closes, whichever thread holds it; the other key’s stay open', async () => {
    const threads = hasReusePort() ? 2 : 1;
    expect(g.stderr()).toContain(`"threads":${threads}`);
    const issue = async (label: string) => {
      const r = await call(g.url, admin, 'POST', '/v2/api-keys', {
        label,
        environment: 'production',
        scopes: ['api:read'],
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body as { id: string; secret: string };
    };
    const [a, b] = [await issue('a'), await issue('b')];
    const ws = `${g.url.replace('http:', 'ws:')}/api/socket`;
    // Each on a connection of its own: the kernel spreads them over the threads.
    const as: Tunnel[] = [];
    const bs: Tunnel[] = [];
    for (let i = 0; i < 8; i++) {
      as.push(await openTunnel(ws, a.secret));
      bs.push(await openTunnel(ws, b.secret));
    }
    for (const x of [...as, ...bs]) await expect(echo(x, 'hi')).resolves.toBe('hi');

    const r = await call(g.url, admin, 'DELETE', `/v2/api-keys/${a.id}`);
    expect(r.status).toBe(200);
    await Promise.all(as.map((x) => closedWithin(x, 1500)));
    for (const x of bs) await expect(echo(x, 'on')).resolves.toBe('on');
    expect(bs.every((x) => x.closedAt() === null)).toBe(true);
    for (const x of bs) x.ws.terminate();
    expect(g.proc.exitCode).toBeNull();
    g.proc.kill('SIGTERM');
    expect(await g.exited).toEqual({ code: 0, signal: null });
  }, 60_000);
});
