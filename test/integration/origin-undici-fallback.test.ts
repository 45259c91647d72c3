import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OriginHandler } from '../../src/proxy/origin-client.js';
import { onUndici } from '../../src/proxy/upstream.js';

/**
 * The proxy's client where Node's parser cannot be loaded: undici's Pool behind the same
 * handler, which hears header and trailer fields as strings, bytes 0x80-0xFF as sent.
 */
describe('the undici fallback of the proxy client', () => {
  let origin: http.Server;
  let pool: Pool;
  beforeAll(async () => {
    origin = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, 'OK', ['X-Obs', 'caf\xe9', 'Trailer', 'X-Sum', 'Content-Type', 'text/plain']);
      res.write('hello');
      res.addTrailers({ 'X-Sum': '\xff1' });
      res.end();
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    pool = new Pool(`http://127.0.0.1:${(origin.address() as AddressInfo).port}`);
  });
  afterAll(async () => {
    await pool.destroy();
    await new Promise((r) => origin.close(r));
  });

  it('passes status, headers, body and trailers to the handler as strings', async () => {
    const got = await new Promise<{ status: number; raw: string[]; body: string; trailers: string[] | null }>(
      (resolve, reject) => {
        let status = 0;
        let raw: string[] = [];
        let body = '';
        const h: OriginHandler = {
          onConnect: () => {},
          onHeaders: (s, r) => {
            status = s;
            raw = r;
            return true;
          },
          onData: (c) => {
            body += c.toString();
            return true;
          },
          onComplete: (trailers) => resolve({ status, raw, body, trailers }),
          onError: reject,
        };
        onUndici(pool).dispatch(
          { method: 'GET', path: '/x', headers: ['Host', 'o'], body: null, headersTimeout: 5000 },
          h,
        );
      },
    );
    expect(got.status).toBe(200);
    expect(got.raw.every((v) => typeof v === 'string')).toBe(true);
    expect(got.raw[got.raw.indexOf('X-Obs') + 1]).toBe('caf\xe9');
    expect(got.body).toBe('hello');
    expect(got.trailers).toEqual(['X-Sum', '\xff1']);
  });
});
