import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type Pair, type TestCerts } from '../helpers/certs.js';
import { call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';
import { httpsGet } from '../helpers/tls-client.js';

/** Client certificates: recorded on the wake, and on auth: mtls routes the key they name (issue #37). */
describe('mTLS', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let url: string;
  let keyId: string;
  let stranger: Pair;
  let untrusted: Pair;

  beforeAll(async () => {
    certs = makeCerts();
    stranger = certs.make('stranger', 'stranger', []);
    untrusted = certs.make('untrusted', 'client-one', [], { ca: 'other' });
    origin = await echoOrigin('prod');
    t = await startGateway({
      server: {
        tls: {
          certificates: [{ cert: certs.server.cert, key: certs.server.key }],
          client_ca: certs.ca,
          client_auth: 'optional',
        },
      },
      routes: [
        {
          name: 'mtls',
          prefix: '/mtls',
          auth: 'mtls',
          scopes: { read: 'api:read', write: 'api:write' },
          origins: { production: origin.url },
        },
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
      ],
    });
    url = `https://127.0.0.1:${new URL(t.url).port}`;
    // Colons and upper case, as openssl prints it: stored as lower-case hex.
    const printed = certs.client.fingerprint.toUpperCase().replace(/(..)(?!$)/g, '$1:');
    const r = await call(t.managementUrl, t.admin, 'POST', '/v2/api-keys', {
      label: 'cert client',
      environment: 'production',
      scopes: ['api:read'],
      tls_fingerprint: printed,
    });
    expect(r.status).toBe(201);
    expect(r.body.tls_fingerprint).toBe(certs.client.fingerprint);
    keyId = r.body.id as string;
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
    certs?.cleanup();
  });

  const get = (path: string, pair?: Pair, method?: string) =>
    httpsGet(`${url}${path}`, {
      ca: certs.caPem,
      ...(pair ? { cert: pair.certPem, key: pair.keyPem } : {}),
      ...(method ? { headers: { 'x-method': method } } : {}),
    });
  const headerOf = (body: string, name: string) => {
    const raw = (JSON.parse(body) as { rawHeaders: string[] }).rawHeaders;
    const i = raw.findIndex((h) => h.toLowerCase() === name);
    return i === -1 ? undefined : raw[i + 1];
  };

  it('admits the certificate a key names, as that key', async () => {
    const r = await get('/mtls/x', certs.client);
    expect(r.status).toBe(200);
    expect(headerOf(r.body, 'x-wakegate-key-id')).toBe(keyId);
    expect(headerOf(r.body, 'x-wakegate-consumer')).toBe('cert%20client');
  });

  it('refuses with the normal 401 body without a certificate, with one no key names, and with one the CA did not sign', async () => {
    for (const pair of [undefined, stranger, untrusted]) {
      const r = await get('/mtls/x', pair);
      expect(r.status).toBe(401);
      const body = JSON.parse(r.body) as { error: { type: string; message: string; wake_id: string } };
      expect(body.error.type).toBe('authentication_required');
      expect(body.error.message).toContain('client certificate');
      expect(body.error.wake_id).toBe(r.headers['x-wake-id']);
    }
    // A bearer key is no way in on an mtls route.
    const r = await httpsGet(`${url}/mtls/x`, { ca: certs.caPem, headers: { authorization: `Bearer ${t.admin}` } });
    expect(r.status).toBe(401);
  });

  it('records the certificate on the wake of every request on the connection', async () => {
    const r = await get('/open/wake', certs.client);
    expect(r.status).toBe(200);
    const plain = await get('/open/plain');
    await flushed(t.gw);
    const w = await call(t.managementUrl, t.admin, 'GET', `/v2/wakes/${r.headers['x-wake-id']}`);
    expect(w.status).toBe(200);
    expect(w.body.tls_subject).toBe('CN=client-one,O=wakegate tests');
    expect(w.body.tls_fingerprint).toBe(certs.client.fingerprint);
    expect(w.body.protocol).toBe('http/1.1');
    const p = await call(t.managementUrl, t.admin, 'GET', `/v2/wakes/${plain.headers['x-wake-id']}`);
    expect(p.body.tls_subject).toBeNull();
    expect(p.body.tls_fingerprint).toBeNull();
  });

  it('serves curl with --cert', async () => {
    const port = new URL(url).port;
    const { stdout } = await promisify(execFile)('curl', [
      '-sS',
      '--cacert',
      certs.ca,
      '--cert',
      certs.client.cert,
      '--key',
      certs.client.key,
      '-o',
      '/dev/null',
      '-w',
      '%{http_code}',
      `https://localhost:${port}/mtls/curl`,
    ]);
    expect(stdout).toBe('200');
  });

  it('sets and clears the certificate through PATCH, one live key per certificate', async () => {
    const bad = await call(t.managementUrl, t.admin, 'PATCH', `/v2/api-keys/${keyId}`, { tls_fingerprint: 'abc' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('tls_fingerprint');
    const other = await call(t.managementUrl, t.admin, 'POST', '/v2/api-keys', {
      label: 'other',
      environment: 'production',
      scopes: ['api:read'],
      tls_fingerprint: certs.client.fingerprint,
    });
    expect(other.status).toBe(409);
    const cleared = await call(t.managementUrl, t.admin, 'PATCH', `/v2/api-keys/${keyId}`, { tls_fingerprint: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body.tls_fingerprint).toBeNull();
    expect((await get('/mtls/x', certs.client)).status).toBe(401);
    const moved = await call(t.managementUrl, t.admin, 'PATCH', `/v2/api-keys/${keyId}`, {
      tls_fingerprint: stranger.fingerprint,
    });
    expect(moved.body.tls_fingerprint).toBe(stranger.fingerprint);
    expect((await get('/mtls/x', stranger)).status).toBe(200);
    const view = await call(t.managementUrl, t.admin, 'GET', `/v2/api-keys/${keyId}`);
    expect(view.body.tls_fingerprint).toBe(stranger.fingerprint);
  });
});
