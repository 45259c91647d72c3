import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// An origin's trailer fields were passed to the client as they came, while its header
// fields of the same names are the gateway's to write or are dropped: a trailer
// `x-wake-id: wk_forged` reached the client beside the gateway's own, and framing,
// routing and the gateway's rate-limit fields passed too (RFC 9110 §6.5.1: a sender MUST
// NOT put those in a trailer section, and a recipient must not take them as headers).

const TRAILERS: Record<string, string> = {
  'server-timing': 'db;dur=53',
  'grpc-status': '0',
  'x-wake-id': 'wk_forged',
  'x-wakegate-consumer': 'admin',
  'content-type': 'text/html',
  host: 'evil.example',
  ratelimit: 'limit=1, remaining=1, reset=1',
};

describe('an origin’s trailer fields, as the client gets them', () => {
  let origin: TestServer;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('hello');
      res.addTrailers(TRAILERS);
      res.end();
    });
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it('end-to-end ones pass; the gateway’s own, framing and routing ones do not', async () => {
    const r = await new Promise<{ wake: string; trailers: Record<string, string | undefined> }>((resolve, reject) => {
      http
        .get(`${t.url}/open/t`, (res) => {
          res.resume();
          res.on('end', () => resolve({ wake: String(res.headers['x-wake-id']), trailers: { ...res.trailers } }));
        })
        .on('error', reject);
    });
    expect(r.wake).toMatch(/^wk_/);
    expect(r.trailers['server-timing']).toBe('db;dur=53');
    expect(r.trailers['grpc-status']).toBe('0');
    for (const gone of [
      'x-wake-id',
      'x-wakegate-consumer',
      'content-length',
      'content-type',
      'host',
      'transfer-encoding',
    ])
      expect(r.trailers[gone], gone).toBeUndefined();
  });
});
