import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/** What the gateway refuses before a request exists (docs/capture.md): no wake, wake_id null, and a reason. */
describe('refusals before a request exists', () => {
  let origin: TestServer;
  let hits = 0;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      hits++;
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('a header section past server.max_header_bytes is 431 naming the setting and its limit, no wake id', async () => {
    const r = await rawExchange(port, `GET /open/x HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(17_000)}\r\n\r\n`);
    expect(statusOf(r.text)).toBe(431);
    const body = JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4));
    expect(body.error).toEqual({
      type: 'request_header_fields_too_large',
      message: "the request's header section is larger than server.max_header_bytes (16384 bytes)",
      param: null,
      retry_after: null,
      wake_id: null,
    });
    expect(r.text.toLowerCase()).not.toContain('x-wake-id');
    expect(hits).toBe(0);
  });

  it('a request Node cannot parse is still 400 malformed request', async () => {
    const r = await rawExchange(port, 'GET /open/x HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n');
    expect(statusOf(r.text)).toBe(400);
    expect(r.text).toContain('"message":"malformed request"');
    expect(hits).toBe(0);
  });

  it('a /v2 body past server.api_body_limit_bytes (1 MiB) is 413, and a wake of route v2 (a request did exist)', async () => {
    const r = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'x'.repeat(1_100_000), environment: 'production', scopes: ['wakes:read'] }),
    });
    expect(r.status).toBe(413);
    const id = r.headers.get('x-wake-id');
    expect(id).toMatch(/^wk_/);
    expect((await r.json()).error).toMatchObject({
      type: 'payload_too_large',
      message: 'the request body is larger than server.api_body_limit_bytes (1048576 bytes)',
      wake_id: id,
    });
  });
});
