import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Regression tests from a review of the /v2 contract and W3C Trace Context (each failed before its fix).

/**
 * DESIGN.md "Errors": "Unknown query parameters and body fields are 400 `invalid_request`
 * naming `param`." DESIGN.md "The /v2 API": "A key of a test-class environment can never
 * name another environment"; SPEC Authentication 2: "A sandbox key never reads production
 * data, whatever its scopes."
 */
describe('/v2 contract: unknown parameters, empty cursors, bad trace ids, sandbox isolation', () => {
  let t: TestGateway;
  let origin: TestServer;

  /** A /v2 call with a raw body (or none) and an optional Content-Type. */
  const raw = async (method: string, path: string, body?: string, key = t.admin) => {
    const r = await fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(key), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body,
    });
    // biome-ignore lint/suspicious/noExplicitAny: API answers read loosely
    return { status: r.status, body: (await r.json()) as Record<string, any> };
  };

  beforeAll(async () => {
    // /fail answers 500, so a webhook delivery to it fails (and can be replayed).
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(req.url?.startsWith('/fail') ? 500 : 200, { 'content-type': 'application/json' });
        res.end('{}');
      });
    });
    t = await startGateway({
      capture: { flush_interval_ms: 20 },
      webhooks: { allow_insecure_http: true, allow_private_networks: true },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it('GET /v2/environments?bogus=1 is 400 invalid_request naming bogus', async () => {
    const r = await raw('GET', '/v2/environments?bogus=1');
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'bogus' });
  });

  it('GET /v2/environments?environment=sandbox (a parameter it does not take) is 400 naming environment', async () => {
    const r = await raw('GET', '/v2/environments?environment=sandbox');
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'environment' });
  });

  it('POST /v2/webhooks/endpoints/{id}/rotate-secret with an unknown body field is 400 naming it', async () => {
    const ep = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
      url: `${origin.url}/hook-rotate`,
      events: ['*'],
    });
    expect(ep.status).toBe(201);
    const r = await raw('POST', `/v2/webhooks/endpoints/${ep.body.id}/rotate-secret`, '{"keep_old_secret":false}');
    expect(r.body.secret, 'the secret was rotated although the call was malformed').toBeUndefined();
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'keep_old_secret' });
  });

  it('POST /v2/webhooks/endpoints/{id}/test with an unknown body field is 400 naming it', async () => {
    const ep = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
      url: `${origin.url}/hook-test`,
      events: ['*'],
    });
    const r = await raw('POST', `/v2/webhooks/endpoints/${ep.body.id}/test`, '{"event_type":"wake.error"}');
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'event_type' });
  });

  it('DELETE /v2/webhooks/endpoints/{id} with an unknown body field is 400 naming it, and deletes nothing', async () => {
    const ep = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
      url: `${origin.url}/hook-delete`,
      events: ['*'],
    });
    const r = await raw('DELETE', `/v2/webhooks/endpoints/${ep.body.id}`, '{"cancel_pending":false}');
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'cancel_pending' });
    expect((await call(t.url, t.admin, 'GET', `/v2/webhooks/endpoints/${ep.body.id}`)).status).toBe(200);
  });

  it('POST /v2/webhooks/deliveries/{id}/replay with an unknown body field is 400 naming it', async () => {
    const ep = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
      url: `${origin.url}/fail`,
      events: ['*'],
    });
    const d = await call(t.url, t.admin, 'POST', `/v2/webhooks/endpoints/${ep.body.id}/test`);
    expect(d.status).toBe(201);
    let status = '';
    for (let i = 0; i < 100 && status !== 'failed'; i++) {
      status = (await call(t.url, t.admin, 'GET', `/v2/webhooks/deliveries/${d.body.id}`)).body.status;
      if (status !== 'failed') await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe('failed');
    const r = await raw('POST', `/v2/webhooks/deliveries/${d.body.id}/replay`, '{"endpoint_id":"we_other"}');
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'endpoint_id' });
  });

  it('an empty cursor is 400 param cursor on every list, as on /v2/wakes and /v2/api-keys', async () => {
    for (const list of ['/v2/wakes', '/v2/api-keys', '/v2/webhooks/endpoints', '/v2/webhooks/deliveries']) {
      const r = await raw('GET', `${list}?cursor=`);
      expect(r.status, list).toBe(400);
      expect(r.body.error, list).toMatchObject({ type: 'invalid_request', param: 'cursor' });
    }
  });

  it('GET /v2/wakes?trace_id= with the all-zero trace id (invalid in W3C Trace Context) is 400 param trace_id', async () => {
    // A malformed id is refused (`trace_id=xyz` is 400); the all-zero id is no trace id either.
    expect((await raw('GET', '/v2/wakes?trace_id=xyz')).status).toBe(400);
    const r = await raw('GET', `/v2/wakes?trace_id=${'0'.repeat(32)}`);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'trace_id' });
  });

  describe('a sandbox key is never told a production key id', () => {
    let sandbox: string;
    beforeAll(async () => {
      const s = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
        label: 'sandbox-admin',
        environment: 'sandbox',
        scopes: ['keys:read', 'keys:write', 'wakes:read'],
      });
      expect(s.status).toBe(201);
      sandbox = s.body.secret as string;
      await flushed(t.gw);
    });

    it('issuing a sandbox key with the consumer of a production key: the refusal does not name that key', async () => {
      const live = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
        label: 'live partner',
        consumer: 'acme-live',
        environment: 'production',
        scopes: ['wakes:read'],
      });
      expect(live.status).toBe(201);
      // The production id itself is unknown to the sandbox key: 404.
      expect((await call(t.url, sandbox, 'GET', `/v2/api-keys/${live.body.id}`)).status).toBe(404);
      const r = await call(t.url, sandbox, 'POST', '/v2/api-keys', {
        label: 'mine',
        consumer: 'acme-live',
        environment: 'sandbox',
        scopes: ['wakes:read'],
      });
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(JSON.stringify(r.body)).not.toContain(live.body.id);
    });

    it('issuing a sandbox key with the certificate of a production key: the refusal does not name that key', async () => {
      const fp = 'ab'.repeat(32);
      const live = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
        label: 'live mtls',
        environment: 'production',
        scopes: ['wakes:read'],
        tls_fingerprint: fp,
      });
      expect(live.status).toBe(201);
      const r = await call(t.url, sandbox, 'POST', '/v2/api-keys', {
        label: 'mine-mtls',
        environment: 'sandbox',
        scopes: ['wakes:read'],
        tls_fingerprint: fp,
      });
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(JSON.stringify(r.body)).not.toContain(live.body.id);
    });
  });
});
