import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { deadPort, echoOrigin, startServer, type TestServer } from '../helpers/origin.js';

interface Raw {
  status: number;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
}

function raw(
  url: string,
  opts: { method?: string; path: string; headers?: string[] | Record<string, string>; body?: Buffer | string },
): Promise<Raw> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        method: opts.method ?? 'GET',
        path: opts.path,
        headers: opts.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

describe('proxy', () => {
  let origin: TestServer;
  let slow: TestServer;
  let t: TestGateway;
  let dead: number;

  beforeAll(async () => {
    origin = await echoOrigin('prod');
    slow = await startServer((_req, res) => {
      setTimeout(() => res.end('late'), 2000).unref();
    });
    dead = await deadPort();
    t = await startGateway({
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        {
          name: 'stripped',
          prefix: '/strip',
          strip_prefix: true,
          auth: 'none',
          origins: { production: `${origin.url}/base` },
        },
        { name: 'slow', prefix: '/slow', auth: 'none', timeout_ms: 200, origins: { production: slow.url } },
        { name: 'dead', prefix: '/dead', auth: 'none', origins: { production: `http://127.0.0.1:${dead}` } },
      ],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
    await slow.close();
  });

  it('forwards path, query and headers byte-exact, drops hop-by-hop headers, adds X-Forwarded-*', async () => {
    const r = await raw(t.url, {
      path: '/open/a%20b/C?x=1&x=2&y=%2F&empty=',
      headers: [
        'X-Mixed-Case',
        'Keep',
        'x-dup',
        '1',
        'x-dup',
        '2',
        'Connection',
        'keep-alive, X-Hop',
        'X-Hop',
        'gone',
        'Host',
        'front.example',
        'X-Forwarded-For',
        '10.9.8.7',
      ],
    });
    expect(r.status).toBe(200);
    const echo = JSON.parse(r.body);
    expect(echo.url).toBe('/open/a%20b/C?x=1&x=2&y=%2F&empty=');
    const h: string[] = echo.rawHeaders;
    const pairs = Array.from({ length: h.length / 2 }, (_, i) => [h[2 * i], h[2 * i + 1]]);
    expect(pairs).toContainEqual(['X-Mixed-Case', 'Keep']);
    expect(pairs.filter(([k]) => k === 'x-dup')).toEqual([
      ['x-dup', '1'],
      ['x-dup', '2'],
    ]);
    expect(pairs.find(([k]) => k === 'X-Hop')).toBeUndefined();
    // The client is no trusted proxy: its X-Forwarded-For is replaced, not appended to.
    expect(pairs).toContainEqual(['X-Forwarded-For', '127.0.0.1']);
    expect(pairs).toContainEqual(['X-Forwarded-Proto', 'http']);
    expect(pairs).toContainEqual(['X-Forwarded-Host', 'front.example']);
    expect(r.headers['x-wake-id']).toMatch(/^wk_[0-9a-z]{9}[0-9A-Za-z]{14}$/);
    expect(r.headers['x-origin']).toBe('prod');
  });

  it('strips the route prefix under the origin base path when asked', async () => {
    const r = await raw(t.url, { path: '/strip/x/y?q=1' });
    expect(JSON.parse(r.body).url).toBe('/base/x/y?q=1');
    const root = await raw(t.url, { path: '/strip' });
    expect(JSON.parse(root.body).url).toBe('/base/');
  });

  it('answers 404 resource_missing when no route matches, with the error body', async () => {
    const r = await raw(t.url, { path: '/nowhere' });
    expect(r.status).toBe(404);
    const b = JSON.parse(r.body);
    expect(b.error.type).toBe('resource_missing');
    expect(b.error.wake_id).toBe(r.headers['x-wake-id']);
    expect(Object.keys(b.error).sort()).toEqual(['message', 'param', 'retry_after', 'type', 'wake_id']);
    // A prefix matches whole segments only.
    expect((await raw(t.url, { path: '/openx' })).status).toBe(404);
  });

  it('answers 504 upstream_timeout and 502 upstream_unavailable', async () => {
    const s = await raw(t.url, { path: '/slow' });
    expect(s.status).toBe(504);
    expect(JSON.parse(s.body).error.type).toBe('upstream_timeout');
    const d = await raw(t.url, { path: '/dead/x' });
    expect(d.status).toBe(502);
    expect(JSON.parse(d.body).error.type).toBe('upstream_unavailable');
  });

  it('refuses dot segments and encoded slashes rather than letting them change the route', async () => {
    for (const path of ['/open/../dead', '/open/%2e%2e/dead', '/open/a%2fb', '/open/%2E%2E/x']) {
      const r = await raw(t.url, { path });
      expect(r.status, path).toBe(400);
      expect(JSON.parse(r.body).error).toMatchObject({ type: 'invalid_request', param: 'path' });
    }
  });

  it('records one wake per request, including the ones the gateway answers itself', async () => {
    await flushed(t.gw);
    const before = await t.gw.wakes.count('production');
    await raw(t.url, { path: '/open/w1', headers: { 'user-agent': 'wake-test', 'x-consumer-id': 'acme' } });
    await raw(t.url, { path: '/nowhere/w2' });
    await raw(t.url, { path: '/dead/w3' });
    await flushed(t.gw);
    expect(await t.gw.wakes.count('production')).toBe(before + 3);
    const res = await fetch(`${t.url}/v2/wakes?limit=100`, { headers: bearer(t.admin) });
    const page = await res.json();
    const w1 = page.data.find((w: { path: string }) => w.path === '/open/w1');
    expect(w1).toMatchObject({
      object: 'wake',
      method: 'GET',
      status: 200,
      route: 'open',
      consumer: 'acme',
      environment: 'production',
      user_agent: 'wake-test',
      region: 'local',
    });
    expect(w1.response_bytes).toBeGreaterThan(0);
    expect(page.data.find((w: { path: string }) => w.path === '/nowhere/w2')).toMatchObject({ status: 404 });
    expect(page.data.find((w: { path: string }) => w.path === '/dead/w3')).toMatchObject({
      status: 502,
      route: 'dead',
    });
  });

  it('serves /healthz, /readyz and /metrics on the ops listener', async () => {
    expect((await fetch(`${t.opsUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${t.opsUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', storage: 'up', migrations_applied: true });
    const text = await (await fetch(`${t.opsUrl}/metrics`)).text();
    expect(text).toMatch(/wakegate_requests_total\{route="open",method="GET",status_class="2xx"\} \d+/);
    expect(text).toContain('wakegate_gateway_overhead_seconds_bucket');
    expect(text).toContain('wakegate_wakes_flushed_total');
    expect(text).toContain('wakegate_process_resident_memory_bytes');
    expect(text).not.toMatch(/\/open\/w1/);
  });
});
