import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';
import { httpsGet } from '../helpers/tls-client.js';

/** client_auth: required refuses the handshake itself without a certificate the client CA signed. */
describe('client_auth: required', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let url: string;

  beforeAll(async () => {
    certs = makeCerts();
    origin = await echoOrigin();
    t = await startGateway({
      server: {
        tls: {
          certificates: [{ cert: certs.server.cert, key: certs.server.key }],
          client_ca: certs.ca,
          client_auth: 'required',
          min_version: 'TLSv1.3',
        },
      },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    url = `https://127.0.0.1:${new URL(t.url).port}/open/x`;
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
    certs?.cleanup();
  });

  it('serves a client with a certificate the CA signed, and refuses others at the handshake (counted)', async () => {
    const ok = await httpsGet(url, { ca: certs.caPem, cert: certs.client.certPem, key: certs.client.keyPem });
    expect(ok.status).toBe(200);
    await expect(httpsGet(url, { ca: certs.caPem })).rejects.toThrow();
    const other = certs.make('other-client', 'other', [], { ca: 'other' });
    await expect(httpsGet(url, { ca: certs.caPem, cert: other.certPem, key: other.keyPem })).rejects.toThrow();
    const text = await (await fetch(`${t.opsUrl}/metrics`)).text();
    expect(Number(/wakegate_tls_handshake_failures_total\{listener="main"\} (\d+)/.exec(text)?.[1])).toBe(2);
    // The gateway serves on.
    const again = await httpsGet(url, { ca: certs.caPem, cert: certs.client.certPem, key: certs.client.keyPem });
    expect(again.status).toBe(200);
  });
});
