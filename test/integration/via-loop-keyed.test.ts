// Regression tests from a review of the 2026-11-28 session's changes (each failed before its fix).
import http from 'node:http';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';

// A route whose origin is the gateway itself: each client request passes twice, the second
// pass is refused 508 (admission/via.ts). The 508 is refused through addressCharged, which
// draws the unauthenticated per-address bucket of the second pass's client: the gateway's own
// address. Once that bucket is spent, the loop is no longer reported as a loop but as 429
// rate_limit_exceeded (with Retry-After), and 99 in 100 of those wakes are sampled out.

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

function get(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, (res) => {
      let b = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        b += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: b, headers: res.headers }));
    });
    req.on('error', reject);
  });
}

describe('Via loop refusal, review', () => {
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
});
