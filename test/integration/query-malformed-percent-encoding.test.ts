// Regression tests from a review of the /v2 API and CLI (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * SPEC Errors: "invalid_request 400: Request shape is wrong. param names the offending key". A query
 * value whose percent-escapes are not UTF-8 (`%E9`, Latin-1 é; `%ED%A0%80`, a surrogate) names no
 * string; the API reads it as the literal text `Caf%E9` instead, and answers for that.
 */
describe('GET /v2/wakes with a query value whose percent-escapes are not UTF-8', () => {
  let t: TestGateway;
  let origin: TestServer;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('{}'));
    });
    t = await startGateway({
      capture: { flush_interval_ms: 20 },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it('consumer=Caf%E9 is 400 naming consumer, not the wakes of the consumer spelt "Caf%E9" literally', async () => {
    // A keyless wake whose consumer (x-consumer-id) is the seven ASCII characters C a f % E 9.
    const r = await fetch(`${t.url}/open/a`, { headers: { 'x-consumer-id': 'Caf%E9' } });
    await r.arrayBuffer();
    await flushed(t.gw);
    const literal = await call(t.url, t.admin, 'GET', `/v2/wakes?consumer=${encodeURIComponent('Caf%E9')}`);
    expect(literal.body.data?.map((w: { path: string }) => w.path)).toEqual(['/open/a']);

    // Latin-1 é, not UTF-8: no consumer is named.
    const bad = await call(t.url, t.admin, 'GET', '/v2/wakes?consumer=Caf%E9');
    expect(
      { status: bad.status, found: bad.body.data?.map((w: { consumer: string }) => w.consumer) ?? null },
      'the undecodable value was searched for as the literal text "Caf%E9"',
    ).toMatchObject({ status: 400 });
    expect(bad.body.error).toMatchObject({ type: 'invalid_request', param: 'consumer' });
  });

  it('path=%2Fopen%2F%ED%A0%80 (encodeURIComponent of /open/ and a surrogate) is 400 naming path for its encoding, not "path: must start with /"', async () => {
    const bad = await call(t.url, t.admin, 'GET', '/v2/wakes?path=%2Fopen%2F%ED%A0%80');
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('path');
    expect(bad.body.error.message, 'the value sent does start with /').not.toMatch(/must start with \//);
  });
});
