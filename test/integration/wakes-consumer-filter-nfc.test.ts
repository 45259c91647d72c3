// Regression tests from a review of the /v2 API and CLI (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * docs/api.md (POST /v2/api-keys): "`label` and `consumer` ... are normalized to NFC, and stored and
 * returned so (`e` followed by U+0301 becomes `é`)". DESIGN.md: "consumer names are compared after NFC
 * normalization". GET /v2/api-keys?consumer= finds a key by its consumer typed decomposed (keys.ts:
 * "Stored names are NFC: a filter given decomposed finds them too"); SPEC GET /v2/wakes: "consumer:
 * Consumer identifier or name"; keys-and-limits.md: review the key's activity with GET /v2/wakes.
 */
describe('GET /v2/wakes?consumer= and a consumer typed decomposed (NFD)', () => {
  let t: TestGateway;
  let origin: TestServer;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('{}'));
    });
    t = await startGateway({
      capture: { flush_interval_ms: 20 },
      routes: [
        {
          name: 'pay',
          prefix: '/pay',
          auth: 'required',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url },
        },
      ],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it("finds the wakes of a key whose consumer is 'Café team' when the filter spells it e + U+0301, as the key list does", async () => {
    const nfd = 'Cafe\u0301 team';
    const k = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'cafe',
      consumer: nfd,
      environment: 'production',
      scopes: ['payments:read'],
    });
    expect(k.status).toBe(201);
    expect(k.body.consumer).toBe('Café team'.normalize('NFC'));
    const r = await fetch(`${t.url}/pay/orders`, { headers: bearer(k.body.secret) });
    await r.arrayBuffer();
    expect(r.status).toBe(200);
    await flushed(t.gw);

    // The key list finds it by the decomposed spelling.
    const keys = await call(t.url, t.admin, 'GET', `/v2/api-keys?consumer=${encodeURIComponent(nfd)}`);
    expect(keys.body.data.map((x: { id: string }) => x.id)).toEqual([k.body.id]);

    // The wake list, asked the same, finds nothing.
    const nfc = await call(t.url, t.admin, 'GET', `/v2/wakes?consumer=${encodeURIComponent(nfd.normalize('NFC'))}`);
    expect(nfc.body.data.map((w: { path: string }) => w.path)).toEqual(['/pay/orders']);
    const w = await call(t.url, t.admin, 'GET', `/v2/wakes?consumer=${encodeURIComponent(nfd)}`);
    expect(w.status).toBe(200);
    expect(
      w.body.data.map((x: { path: string }) => x.path),
      'the consumer filter is compared byte for byte, not after NFC',
    ).toEqual(['/pay/orders']);
  });
});
