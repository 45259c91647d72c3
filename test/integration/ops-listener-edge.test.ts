import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * The ops listener (/metrics, /readyz, and by default the console and /v2) and a
 * separate management listener hold to the main listener's rules for what Node cannot
 * parse or that comes too slowly: a head trickled past server.headers_timeout_ms is
 * cut, and an oversized head gets the gateway's own JSON 431.
 */
let t: TestGateway;

beforeAll(async () => {
  // One gateway (one embedded store a process): its ops listener and a management listener of its own.
  t = await startGateway({
    server: { headers_timeout_ms: 500, max_header_bytes: 4096 },
    management: { listener: 'separate', port: 0 },
  });
}, 60_000);
afterAll(async () => t?.cleanup(), 60_000);

/** Sends a request head a byte at a time, every 100 ms; when the server closes, how long it took. */
async function trickle(url: string, path: string): Promise<number> {
  const u = new URL(url);
  const s = net.connect(Number(u.port), '127.0.0.1');
  await new Promise((r) => s.once('connect', r));
  s.on('error', () => {});
  const t0 = Date.now();
  const closed = new Promise<number>((r) => s.once('close', () => r(Date.now() - t0)));
  const head = `GET ${path} HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(200)}\r\n\r\n`;
  let i = 0;
  const timer = setInterval(() => {
    if (i < head.length && !s.destroyed) s.write(head[i++] as string);
  }, 100);
  const took = await Promise.race([closed, new Promise<number>((r) => setTimeout(() => r(-1), 8000))]);
  clearInterval(timer);
  s.destroy();
  return took;
}

async function oversized(url: string, path: string): Promise<string> {
  const u = new URL(url);
  const s = net.connect(Number(u.port), '127.0.0.1');
  await new Promise((r) => s.once('connect', r));
  s.on('error', () => {});
  let got = '';
  s.on('data', (c) => {
    got += c;
  });
  s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(8000)}\r\n\r\n`);
  await new Promise((r) => {
    s.once('close', r);
    setTimeout(r, 3000);
  });
  s.destroy();
  return got;
}

describe('the ops and management listeners, against slow and oversized heads', () => {
  for (const [name, url, path] of [
    ['the ops listener (/metrics; the console and /v2 too by default)', () => t.opsUrl, '/metrics'],
    ['a separate management listener', () => t.managementUrl, '/v2/api-keys'],
  ] as const) {
    it(`${name}: a head trickled past headers_timeout_ms is cut`, async () => {
      const took = await trickle(url(), path);
      expect(took).toBeGreaterThan(0);
      expect(took).toBeLessThan(2500);
    }, 15_000);

    it(`${name}: an oversized head gets the gateway's JSON 431, naming the limit`, async () => {
      const got = await oversized(url(), path);
      expect(got).toMatch(/^HTTP\/1\.1 431/);
      const body = JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4)) as { error: { type: string; message: string } };
      expect(body.error.type).toBe('request_header_fields_too_large');
      expect(body.error.message).toContain('server.max_header_bytes');
    }, 15_000);
  }
});
