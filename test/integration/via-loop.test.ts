import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnGateway } from '../helpers/child.js';
import { startGateway } from '../helpers/gateway.js';
import { h2once } from '../helpers/h2.js';
import { startServer } from '../helpers/origin.js';

// RFC 9110 §7.6.3: a gateway MUST add Via to the requests it forwards. Without it a route
// whose origin led back to the gateway (ORIGIN_URL given the gateway's own port) turned one
// anonymous request into 513: each pass took a connection to the "origin" (the gateway
// again) until all 512 were held, and the client got a 503 five seconds later. The gateway
// now names itself in Via and refuses a request that names it: 508 at the second pass.

/** A port free on 127.0.0.1 now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** Sum of wakegate_requests_total in a metrics page. */
function requestsTotal(page: string): number {
  let n = 0;
  for (const m of page.matchAll(/^wakegate_requests_total\{[^}]*\} (\d+)$/gm)) n += Number(m[1]);
  return n;
}

function get(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.get(url, { headers }, (res) => {
      let b = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        b += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: b }));
    });
    req.on('error', reject);
  });
}

describe('Via, and a route whose origin is the gateway itself', () => {
  it('refuses the second pass 508 naming via: two requests, not every connection', async () => {
    const port = await freePort();
    const t = await startGateway({
      server: { port },
      routes: [{ name: 'self', prefix: '/', auth: 'none', origins: { production: `http://127.0.0.1:${port}` } }],
    });
    try {
      const started = Date.now();
      const r = await get(`${t.url}/loop`);
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(r.status).toBe(508);
      const e = JSON.parse(r.body) as { error: { type: string; param: string; message: string } };
      expect(e.error).toMatchObject({ type: 'upstream_unavailable', param: 'via' });
      expect(e.error.message).toMatch(/leads back to the gateway/);
      const page = await (await fetch(`${t.opsUrl}/metrics`)).text();
      expect(requestsTotal(page)).toBe(2);
    } finally {
      await t.cleanup();
    }
  });

  // From a review of this session's changes: the refusal is charged to no rate limit (the
  // gateway's own address allowance ran out, and the loop became 429s).
  it('a looping auth: required route stays 508 for a keyed client however many requests loop', async () => {
    const port = await freePort();
    const t = await startGateway({
      server: { port },
      rate_limits: { unauthenticated: { limit: 3, burst: 3, window: 'minute' } },
      routes: [
        {
          name: 'self',
          prefix: '/',
          auth: 'required',
          scopes: { read: 'self:read', write: 'self:write' },
          origins: { production: `http://127.0.0.1:${port}` },
        },
      ],
    });
    try {
      const statuses: number[] = [];
      const types: string[] = [];
      for (let i = 0; i < 6; i++) {
        const r = await get(`${t.url}/loop/${i}`, { authorization: `Bearer ${t.admin}` });
        statuses.push(r.status);
        types.push((JSON.parse(r.body) as { error?: { type?: string } }).error?.type ?? '');
      }
      // Each keyed request loops once; each is a loop, and each should say so.
      expect({ statuses, types }).toEqual({
        statuses: [508, 508, 508, 508, 508, 508],
        types: Array(6).fill('upstream_unavailable'),
      });
    } finally {
      await t.cleanup();
    }
  });

  it('adds its own Via after the client’s, by the client’s version; another installation in front passes', async () => {
    const seen: string[] = [];
    const origin = await startServer((req, res) => {
      seen.push(String(req.headers.via));
      res.end('ok');
    });
    const inner = await startGateway({
      server: { http2: 'h2c' },
      routes: [{ name: 'all', prefix: '/', auth: 'none', origins: { production: origin.url } }],
    });
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-via-'));
    const cfg = join(dir, 'cfg.yaml');
    writeFileSync(cfg, `routes:\n  - { name: all, prefix: /, auth: none, origins: { production: "${inner.url}" } }\n`);
    const outer = await spawnGateway(['serve', '--config', cfg], { DATA_DIR: join(dir, 'data') });
    try {
      const direct = await get(`${inner.url}/a`, { via: '1.1 corp-proxy' });
      expect(direct.status).toBe(200);
      const ours = /^1\.1 corp-proxy, 1\.1 (wakegate-[0-9a-f]{8})$/.exec(seen[0] as string);
      expect(ours, seen[0]).not.toBeNull();
      const ten = await new Promise<number>((resolve, reject) => {
        const s = net.connect(Number(new URL(inner.url).port), '127.0.0.1', () =>
          s.write('GET /b HTTP/1.0\r\nHost: a.test\r\n\r\n'),
        );
        let b = '';
        s.on('data', (c) => {
          b += c;
        });
        s.on('end', () => resolve(Number(b.split(' ')[1])));
        s.on('error', reject);
      });
      expect(ten).toBe(200);
      expect(seen[1]).toBe(`1.0 ${ours?.[1]}`);
      // An HTTP/2 client's request: received as version 2.
      expect((await h2once(inner.url, { ':method': 'GET', ':path': '/h2' })).status).toBe(200);
      expect(seen[2]).toBe(`2 ${ours?.[1]}`);
      // Chained on purpose: a gateway of another installation in front passes, each naming itself.
      const chained = await get(`${outer.url}/c`);
      expect(chained.status, chained.body).toBe(200);
      const names = (seen[3] as string).split(', ');
      expect(names).toHaveLength(2);
      expect(names[1]).toBe(`1.1 ${ours?.[1]}`);
      expect(names[0]).toMatch(/^1\.1 wakegate-[0-9a-f]{8}$/);
      expect(names[0]).not.toBe(names[1]);
    } finally {
      outer.proc.kill('SIGTERM');
      await outer.exited;
      await inner.cleanup();
      await origin.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
