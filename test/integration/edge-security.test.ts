import { randomBytes } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import http, { type IncomingMessage } from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/seal.js';
import { EventTable } from '../../src/store/events.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  rawHeaders: string[];
}

const once = <T>(emitter: NodeJS.EventEmitter, event: string, ms = 3000): Promise<T> =>
  new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no ${event} within ${ms} ms`)), ms);
    emitter.once(event, (v: T) => {
      clearTimeout(t);
      resolve(v);
    });
  });

describe('the edge holds (issue: no tunnel past the checks, no escalation, no leaks)', () => {
  let plain: TestServer;
  let wsOrigin: net.Server;
  let wsPort = 0;
  const seen: Seen[] = [];
  const wsEvents: string[] = [];
  const held: IncomingMessage[] = [];
  let t: TestGateway;
  let port: number;
  let readKey: string;
  let writeKey: string;

  beforeAll(async () => {
    // A plain Node origin with no upgrade handler: it answers an upgrade request with 200
    // and keeps the connection open for more requests.
    plain = await startServer((req, res) => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders });
      if (
        req.url?.startsWith('/slo/') &&
        (req.headers['x-wakegate-environment'] === 'sandbox' || req.headers['x-fail'])
      ) {
        res.statusCode = 500;
        res.end('sandbox is broken');
        return;
      }
      if (req.url?.startsWith('/pub/hold')) {
        held.push(req);
        return;
      }
      req.resume();
      req.on('end', () => res.end(JSON.stringify({ url: req.url })));
    });
    // A raw WebSocket-like origin: 101, then echoes; on the client's FIN it says bye and ends.
    wsOrigin = net.createServer({ allowHalfOpen: true }, (s) => {
      let buf = '';
      let upgraded = false;
      s.on('data', (c) => {
        if (upgraded) {
          s.write(c);
          return;
        }
        buf += c.toString('latin1');
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) return;
        upgraded = true;
        wsEvents.push(buf.slice(0, end));
        s.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
        const rest = buf.slice(end + 4);
        if (rest) s.write(rest);
      });
      s.on('end', () => {
        wsEvents.push('origin saw FIN');
        s.end('bye');
      });
      s.on('error', () => {});
    });
    await new Promise<void>((r) => wsOrigin.listen(0, '127.0.0.1', r));
    wsPort = (wsOrigin.address() as net.AddressInfo).port;
    t = await startGateway({
      server: { tunnel_idle_timeout_ms: 400 },
      routes: [
        {
          name: 'api',
          prefix: '/api',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: plain.url, sandbox: plain.url },
        },
        { name: 'pub', prefix: '/pub', auth: 'none', origins: { production: plain.url } },
        {
          name: 'slo',
          prefix: '/slo',
          scopes: { read: 'payments:read', write: 'payments:write' },
          availability_objective: 0.999,
          origins: { production: plain.url, sandbox: plain.url },
        },
        { name: 'ws', prefix: '/ws', auth: 'none', origins: { production: `http://127.0.0.1:${wsPort}` } },
      ],
    });
    port = Number(new URL(t.url).port);
    readKey = (
      await t.gw.keys.create({ label: 'r', environment: 'production', scopes: ['payments:read'] }, 'production')
    ).secret;
    writeKey = (
      await t.gw.keys.create({ label: 'w', environment: 'production', scopes: ['payments:write'] }, 'production')
    ).secret;
  });
  afterAll(async () => {
    for (const r of held) r.socket.destroy();
    await t.cleanup();
    await plain.close();
    await new Promise<void>((r) => wsOrigin.close(() => r()));
  });

  it('1. an upgrade the origin answers with 200 is relayed and the connection closed: no smuggled request', async () => {
    seen.length = 0;
    const smuggled =
      'POST /api/admin/delete HTTP/1.1\r\nHost: x\r\nx-wakegate-key-id: key_forged\r\n' +
      'x-wakegate-environment: production\r\nContent-Length: 0\r\n\r\n';
    // Pipelined in the same write, and sent again once the 200 has come back.
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    s.on('data', (c) => {
      text += c.toString('latin1');
      if (text.includes('\r\n\r\n') && !s.destroyed) s.write(smuggled);
    });
    s.on('error', () => {});
    s.write(
      `GET /api/stream HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, X-Keep\r\nUpgrade: websocket\r\nX-Keep: 1\r\n` +
        `Authorization: Bearer ${readKey}\r\n\r\n${smuggled}`,
    );
    await once(s, 'close');
    expect(statusOf(text)).toBe(200);
    expect(text.toLowerCase()).toContain('connection: close');
    expect(text).toMatch(/x-wake-id: wk_/);
    await new Promise((r) => setTimeout(r, 100));
    expect(seen.map((x) => `${x.method} ${x.url}`)).toEqual(['GET /api/stream']);
    // Only `Connection: upgrade` goes up; the fields it named are hop-by-hop and dropped.
    const h = seen[0]?.rawHeaders ?? [];
    const conn = h.filter((_, i) => i % 2 === 1 && h[i - 1]?.toLowerCase() === 'connection');
    expect(conn).toEqual(['upgrade']);
    expect(seen[0]?.headers['x-keep']).toBeUndefined();
    expect(seen[0]?.headers['x-wakegate-key-id']).toMatch(/^key_/);
  });

  it('3. a real 101 makes a tunnel that passes half-closes both ways and is one wake when it ends', async () => {
    wsEvents.length = 0;
    const s = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    let text = '';
    s.on('data', (c) => {
      text += c.toString('latin1');
    });
    s.write('GET /ws/chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nping');
    await new Promise<void>((resolve) => {
      const check = () => (text.includes('ping') ? resolve() : setTimeout(check, 10));
      check();
    });
    expect(statusOf(text)).toBe(101);
    const wakeId = /x-wake-id: (wk_\w+)/.exec(text)?.[1] as string;
    s.end(); // half-close: the origin must see it and may still answer
    await once(s, 'close');
    expect(wsEvents).toContain('origin saw FIN');
    expect(text.endsWith('bye')).toBe(true);
    await t.gw.batcher.flush();
    const w = await (
      await fetch(`${t.url}/v2/wakes/${wakeId}`, { headers: { authorization: `Bearer ${t.admin}` } })
    ).json();
    expect(w).toMatchObject({ id: wakeId, status: 101, route: 'ws' });
  });

  it('3. an idle tunnel is closed after tunnel_idle_timeout_ms', async () => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.resume();
    s.write('GET /ws/idle HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    const t0 = Date.now();
    await once(s, 'close', 3000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
  });

  it('3. an upgrade whose client leaves before the origin answers lets go of the origin socket at once', async () => {
    const before = held.length;
    const s = net.connect(port, '127.0.0.1');
    s.write('GET /pub/hold HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    await new Promise<void>((resolve) => {
      const check = () => (held.length > before ? resolve() : setTimeout(check, 10));
      check();
    });
    const originSide = held[held.length - 1] as IncomingMessage;
    const closed = once(originSide.socket, 'close', 1500);
    s.destroy();
    await closed;
  });

  it('2. a key can only issue keys with scopes it holds', async () => {
    const minter = (
      await t.gw.keys.create({ label: 'm', environment: 'production', scopes: ['keys:write'] }, 'production')
    ).secret;
    const post = (scopes: string[]) =>
      fetch(`${t.url}/v2/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${minter}`, 'content-type': 'application/json' },
        body: JSON.stringify({ label: 'x', environment: 'production', scopes }),
      });
    const r = await post(['wakes:read', 'payments:write']);
    expect(r.status).toBe(403);
    const body = await r.json();
    expect(body.error.type).toBe('insufficient_scope');
    expect(body.error.message).toContain('wakes:read');
    expect((await post(['keys:write'])).status).toBe(201);
  });

  it('4. refused keys are limited per address; long paths are stored capped', async () => {
    // The flood comes from 127.0.0.2, so the limit is seen to be per address.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const get = (path: string, auth?: string) =>
      new Promise<{ status: number; wake: string; retry: string | undefined }>((resolve, reject) => {
        const req = http.get(
          {
            host: '127.0.0.1',
            localAddress: '127.0.0.2',
            port,
            path,
            agent,
            headers: auth ? { authorization: auth } : {},
          },
          (res) => {
            res.resume();
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                wake: res.headers['x-wake-id'] as string,
                retry: res.headers['retry-after'] as string | undefined,
              }),
            );
          },
        );
        req.on('error', reject);
      });
    const bad = `Bearer svc_live_${'x'.repeat(43)}`;
    const sampledBefore = await metric(t, 'wakegate_wakes_sampled_out_total');
    const statuses: number[] = [];
    const t0 = performance.now();
    for (let i = 0; i < 800; i += 50) {
      const batch = await Promise.all(Array.from({ length: 50 }, () => get('/api/flood', bad)));
      for (const b of batch) statuses.push(b.status);
    }
    // 600 of burst, plus the tokens the bucket earns back (10/s) while the flood runs:
    // exactly that many more, however long a loaded machine takes to send it.
    const earned = Math.ceil(((performance.now() - t0) / 1000) * 10);
    const refused = statuses.filter((s) => s === 401).length;
    expect(refused).toBeGreaterThanOrEqual(600);
    expect(refused).toBeLessThanOrEqual(600 + earned + 1);
    expect(statuses.filter((s) => s === 429).length).toBe(800 - refused);
    const sampled = (await metric(t, 'wakegate_wakes_sampled_out_total')) - sampledBefore;
    expect(sampled).toBeGreaterThanOrEqual(Math.floor((800 - refused) * 0.95));
    // Another address is not affected.
    const other = await fetch(`${t.url}/api/flood`, { headers: { authorization: bad } });
    expect(other.status).toBe(401);
    // Only refused keys are limited: a good key from the same address (a shared NAT) still gets through.
    expect((await get('/api/ok', `Bearer ${readKey}`)).status).toBe(200);

    const long = `/pub/${'a'.repeat(15_000)}`;
    const r = await get(long);
    expect(r.status).toBe(200);
    agent.destroy();
    await t.gw.batcher.flush();
    const w = await (
      await fetch(`${t.url}/v2/wakes/${r.wake}`, { headers: { authorization: `Bearer ${t.admin}` } })
    ).json();
    expect(w.path.length).toBe(2048);
    expect(w.path_truncated).toBe(true);
  });

  it('5. dot segments with path parameters are refused like other dot segments', async () => {
    seen.length = 0;
    for (const p of [
      '/pub/..;/api/x',
      '/pub/%2e%2e;/x',
      '/pub/.;/x',
      '/pub/..%3bjsessionid=1/api',
      '/pub/%252e%252e/x',
    ]) {
      const r = await rawExchange(port, `GET ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(statusOf(r.text), p).toBe(400);
    }
    expect(seen).toHaveLength(0);
    // Semicolons elsewhere are an origin's business.
    const ok = await rawExchange(port, 'GET /pub/a;b=1/c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(statusOf(ok.text)).toBe(200);
  });

  it('6. a gateway key never reaches an origin, whatever the route', async () => {
    seen.length = 0;
    const sandboxKey = (
      await t.gw.keys.create({ label: 's', environment: 'sandbox', scopes: ['payments:read'] }, 'sandbox')
    ).secret;
    for (const k of [readKey, sandboxKey]) {
      await fetch(`${t.url}/pub/x`, { headers: { authorization: `Bearer ${k}`, 'x-api-key': k, cookie: `k=${k}` } });
    }
    // As HTTP Basic credentials (`curl -u KEY:`, which the origin decodes), and as a field's name.
    await fetch(`${t.url}/pub/x`, {
      headers: { authorization: `Basic ${Buffer.from(`${readKey}:`).toString('base64')}` },
    });
    await fetch(`${t.url}/pub/x`, { headers: { [readKey]: '1' } });
    await fetch(`${t.url}/pub/y`, { headers: { authorization: 'Bearer origin-own-token' } });
    const own = `Basic ${Buffer.from('user:origin-pass').toString('base64')}`;
    await fetch(`${t.url}/pub/y`, { headers: { authorization: own } });
    expect(seen).toHaveLength(6);
    for (const s of seen.slice(0, 4)) {
      const basic = s.rawHeaders.map((v) => (/^basic /i.test(v) ? Buffer.from(v.slice(6), 'base64').toString() : v));
      expect(JSON.stringify([...s.rawHeaders, ...basic])).not.toMatch(/svc_(live|test)_/);
    }
    expect(seen[4]?.headers.authorization).toBe('Bearer origin-own-token');
    // The origin's own Basic credentials pass.
    expect(seen[5]?.headers.authorization).toBe(own);
  });

  it('7. X-Forwarded-* and Forwarded are the gateway own values', async () => {
    seen.length = 0;
    await fetch(`${t.url}/pub/fwd`, {
      headers: {
        'x-forwarded-proto': 'https',
        'x-forwarded-for': '6.6.6.6',
        'x-forwarded-host': 'evil.example',
        forwarded: 'for=6.6.6.6;proto=https',
        'x-wakegate-consumer': 'forged',
      },
    });
    const h = seen[0]?.headers ?? {};
    expect(h['x-forwarded-proto']).toBe('http');
    expect(h['x-forwarded-for']).toBe('127.0.0.1');
    expect(h['x-forwarded-host']).toBe(`127.0.0.1:${port}`);
    expect(h.forwarded).toBeUndefined();
    expect(h['x-wakegate-consumer']).toBeUndefined();
  });

  it('8. Expect: 100-continue is answered only after the checks pass', async () => {
    const head = (auth: string) =>
      `POST /api/upload HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n`;
    const bad = await rawExchange(port, head(`Bearer svc_live_${'y'.repeat(43)}`), 1500);
    expect(bad.text.startsWith('HTTP/1.1 401')).toBe(true);
    expect(bad.text).not.toContain('100 Continue');
    const scope = await rawExchange(port, head(`Bearer ${readKey}`), 1500);
    expect(scope.text.startsWith('HTTP/1.1 403')).toBe(true);

    const s = net.connect(port, '127.0.0.1');
    let text = '';
    s.on('data', (c) => {
      text += c.toString('latin1');
      if (text.startsWith('HTTP/1.1 100 Continue\r\n\r\n') && !text.includes('200')) s.write('body');
    });
    s.write(head(`Bearer ${writeKey}`).replace('HTTP/1.1\r\n', 'HTTP/1.1\r\nConnection: close\r\n'));
    await once(s, 'close');
    expect(text.startsWith('HTTP/1.1 100 Continue')).toBe(true);
    expect(text).toContain('HTTP/1.1 200');
  });

  it('9. webhook registration refuses every special-purpose address', async () => {
    for (const url of [
      'https://[::ffff:0:7f00:1]/',
      'https://[64:ff9b:1::a00:1]/',
      'https://[::ffff:127.0.0.1]/',
      'https://[3fff::1]/',
      'https://[5f00::1]/',
      'https://[2002:7f00:1::]/',
      'https://192.31.196.1/',
    ]) {
      const r = await fetch(`${t.url}/v2/webhooks/endpoints`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t.admin}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url, events: ['*'] }),
      });
      expect(r.status, url).toBe(422);
      const e = (await r.json()).error;
      expect(e.param, url).toBe('url');
      expect(e.message, url).toContain('webhooks.allow_private_networks');
    }
    const plainHttp = await fetch(`${t.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'http://hooks.example.com/', events: ['*'] }),
    });
    expect((await plainHttp.json()).error.message).toContain('webhooks.allow_insecure_http');
  });

  it('10. SLO state is per route and environment; refusals by the gateway do not count', async () => {
    const sandboxKey = (
      await t.gw.keys.create({ label: 'slo', environment: 'sandbox', scopes: ['payments:read'] }, 'sandbox')
    ).secret;
    for (let i = 0; i < 120; i += 20) {
      await Promise.all(
        Array.from({ length: 20 }, () =>
          fetch(`${t.url}/slo/x`, { headers: { authorization: `Bearer ${sandboxKey}` } }).then((r) => r.text()),
        ),
      );
    }
    expect((await fetch(`${t.url}/slo/x`)).status).toBe(401);
    await t.gw.batcher.flush();
    await t.gw.events.flush();
    const burns = await new EventTable(t.gw.store).list({ type: 'slo.burn' });
    expect(burns.map((e) => e.environment)).toEqual(['sandbox']);
    // Production: 2 real 500s among 120 refused anonymous requests. Counted in, the
    // refusals would make 122 requests and a burn rate of 16; they are no evidence
    // about the origin, so there are only 2 requests and no alert.
    for (let i = 0; i < 2; i++) {
      const r = await fetch(`${t.url}/slo/y`, { headers: { authorization: `Bearer ${readKey}`, 'x-fail': '1' } });
      expect(r.status).toBe(500);
    }
    for (let i = 0; i < 120; i++) await fetch(`${t.url}/slo/y`).then((r) => r.text());
    await t.gw.batcher.flush();
    await t.gw.events.flush();
    expect((await new EventTable(t.gw.store).list({ type: 'slo.burn' })).map((e) => e.environment)).toEqual([
      'sandbox',
    ]);
  });

  it('12. a sealed signing secret is bound to its endpoint: moved to another row it does not open', () => {
    const box = new SecretBox(randomBytes(32));
    const sealed = box.seal('whsec_abc', 'we_1');
    expect(box.open(sealed, 'we_1')).toBe('whsec_abc');
    expect(() => box.open(sealed, 'we_2')).toThrow();
  });

  it('12. data directories are 0700 and engine files 0600', () => {
    const mode = (p: string) => statSync(p).mode & 0o777;
    expect(mode(t.dir)).toBe(0o700);
    expect(mode(join(t.dir, 'clickhouse'))).toBe(0o700);
    expect(mode(join(t.dir, 'wal'))).toBe(0o700);
    expect(mode(join(t.dir, 'wal', 'wakes'))).toBe(0o700);
    for (const f of readdirSync(join(t.dir, 'wal', 'wakes')))
      expect(mode(join(t.dir, 'wal', 'wakes', f)), f).toBe(0o600);
    expect(mode(join(t.dir, 'secret.key'))).toBe(0o600);
  });

  it('3. (last) a clean stop ends open tunnels after its grace period', async () => {
    // Last test: it stops the shared gateway.
    const g = t;
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    let text = '';
    s.on('data', (c) => {
      text += c.toString('latin1');
    });
    s.write('GET /ws/live HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    await new Promise<void>((resolve) => {
      const check = () => (text.includes('\r\n\r\n') ? resolve() : setTimeout(check, 10));
      check();
    });
    expect(g.gw.tunnels.size).toBe(1);
    const t0 = Date.now();
    const closed = once(s, 'close', 5000);
    await g.gw.stop(300);
    await closed;
    expect(Date.now() - t0).toBeLessThan(3000);
  });
});

async function metric(t: TestGateway, name: string): Promise<number> {
  const text = await (await fetch(`${t.opsUrl}/metrics`)).text();
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}
