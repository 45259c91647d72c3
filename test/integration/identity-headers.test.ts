import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where the child gateway serves with two edge threads.

/**
 * Issue #34 item 4: a consumer outside Latin-1 (a key labelled `東京チーム`) was sent
 * raw in `x-wakegate-consumer`: every request was refused 400, and a WebSocket upgrade
 * threw ERR_INVALID_CHAR out of the upgrade handler, which ends the process. Origins
 * now receive the consumer percent-encoded as UTF-8 and decode it.
 */
const TOKYO = '東京チーム';
const TOKYO_ENCODED = '%E6%9D%B1%E4%BA%AC%E3%83%81%E3%83%BC%E3%83%A0';

/** An origin that answers HTTP with the identity headers it received and echoes WebSocket messages. */
async function identityOrigin(): Promise<TestServer & { upgrades: Record<string, string | undefined>[] }> {
  const upgrades: Record<string, string | undefined>[] = [];
  const identity = (req: IncomingMessage) => ({
    consumer: req.headers['x-wakegate-consumer'] as string | undefined,
    keyId: req.headers['x-wakegate-key-id'] as string | undefined,
    environment: req.headers['x-wakegate-environment'] as string | undefined,
    trailers: JSON.stringify(req.trailers),
  });
  const origin = await startServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const body = JSON.stringify(identity(req));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  const wss = new WebSocketServer({ noServer: true });
  origin.server.on('upgrade', (req, socket, head) => {
    upgrades.push(identity(req));
    wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (m, binary) => ws.send(m, { binary })));
  });
  return Object.assign(origin, { upgrades });
}

/** Opens a WebSocket, sends one message and resolves with the echo (or the failure). */
function echoOnce(url: string, secret: string, message: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: bearer(secret) });
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error('no echo within 10 s'));
    }, 10_000);
    ws.on('open', () => ws.send(message));
    ws.on('message', (m) => {
      clearTimeout(timer);
      ws.close();
      resolve(m.toString());
    });
    ws.on('unexpected-response', (_req, res) => {
      clearTimeout(timer);
      reject(new Error(`upgrade answered ${res.statusCode}`));
    });
    ws.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

describe('identity headers of a consumer outside Latin-1', () => {
  let origin: Awaited<ReturnType<typeof identityOrigin>>;
  let t: TestGateway;
  let key: { id: string; secret: string; consumer: string };

  beforeAll(async () => {
    origin = await identityOrigin();
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
    const r = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ label: TOKYO, environment: 'production', scopes: ['api:read', 'api:write'] }),
    });
    key = (await r.json()) as typeof key;
    expect(r.status, JSON.stringify(key)).toBe(201);
    expect(key.consumer).toBe(TOKYO);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('proxies 200, and the origin reads the consumer back with decodeURIComponent', async () => {
    const r = await fetch(`${t.url}/api/who`, { headers: bearer(key.secret) });
    expect(r.status).toBe(200);
    const got = (await r.json()) as { consumer: string; keyId: string; environment: string };
    expect(got.consumer).toBe(TOKYO_ENCODED);
    expect(decodeURIComponent(got.consumer)).toBe(TOKYO);
    expect(got.keyId).toBe(key.id);
    expect(got.environment).toBe('production');
  });

  it('forwards a request with trailers (the node:http path) with the encoded consumer', async () => {
    const port = Number(new URL(t.url).port);
    const req = [
      'POST /api/trail HTTP/1.1',
      'Host: x',
      `Authorization: Bearer ${key.secret}`,
      'Transfer-Encoding: chunked',
      'Trailer: x-sum',
      'Connection: close',
      '',
      '2',
      'hi',
      '0',
      'x-sum: 42',
      '',
      '',
    ].join('\r\n');
    const { text } = await rawExchange(port, req, 10_000);
    expect(statusOf(text), text).toBe(200);
    const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { consumer: string; trailers: string };
    expect(body.consumer).toBe(TOKYO_ENCODED);
    expect(JSON.parse(body.trailers)).toEqual({ 'x-sum': '42' });
  });

  it('tunnels a WebSocket upgrade with that key, and the gateway keeps serving', async () => {
    const wsUrl = `${t.url.replace('http:', 'ws:')}/api/socket`;
    await expect(echoOnce(wsUrl, key.secret, 'こんにちは')).resolves.toBe('こんにちは');
    expect(origin.upgrades.at(-1)?.consumer).toBe(TOKYO_ENCODED);
    const after = await fetch(`${t.url}/api/after`, { headers: bearer(key.secret) });
    expect(after.status).toBe(200);
  });
});

/**
 * The gateway as a child process, with two edge threads where the runtime has
 * SO_REUSEPORT (Node 26, scripts/test-on-lts.sh; one elsewhere): an uncaught
 * ERR_INVALID_CHAR ended the process on Node 20 and the edge threads on Node 26.
 */
describe('the gateway as a process with a consumer outside Latin-1', () => {
  const admin = `svc_live_${newSecret()}`;
  let origin: Awaited<ReturnType<typeof identityOrigin>>;
  let dir: string;
  let g: ChildGateway;
  let secret: string;

  beforeAll(async () => {
    origin = await identityOrigin();
    dir = mkdtempSync(join(tmpdir(), 'wakegate-identity-'));
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
    const r = await fetch(`${g.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(admin), 'content-type': 'application/json' },
      body: JSON.stringify({ label: TOKYO, environment: 'production', scopes: ['api:read'] }),
    });
    const k = (await r.json()) as { secret: string };
    expect(r.status, JSON.stringify(k)).toBe(201);
    secret = k.secret;
  }, 60_000);
  afterAll(async () => {
    if (g && g.proc.exitCode === null) g.proc.kill('SIGKILL');
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('tunnels WebSocket upgrades on every thread, serves on, and stops cleanly', async () => {
    const threads = hasReusePort() ? 2 : 1;
    expect(g.stderr()).toContain(`"threads":${threads}`);
    const wsUrl = `${g.url.replace('http:', 'ws:')}/api/socket`;
    // Each on a connection of its own, so the kernel hands them to both threads.
    for (let i = 0; i < 12; i++) await expect(echoOnce(wsUrl, secret, `m${i}`)).resolves.toBe(`m${i}`);
    expect(origin.upgrades.length).toBe(12);
    for (const u of origin.upgrades) expect(u.consumer).toBe(TOKYO_ENCODED);
    const seen = new Set<string | null>();
    for (let i = 0; i < 30; i++) {
      const r = await fetch(`${g.url}/api/plain/${i}`, { headers: { ...bearer(secret), connection: 'close' } });
      expect(r.status).toBe(200);
      expect(decodeURIComponent(((await r.json()) as { consumer: string }).consumer)).toBe(TOKYO);
      seen.add(r.headers.get('x-wakegate-thread'));
    }
    expect(seen.size).toBe(threads);
    expect(g.proc.exitCode).toBeNull();
    expect(g.stderr()).not.toContain('ERR_INVALID_CHAR');
    g.proc.kill('SIGTERM');
    expect(await g.exited).toEqual({ code: 0, signal: null });
  }, 60_000);
});
