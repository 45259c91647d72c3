// Regression tests from a review of TLS and HTTP/2 at the edge (2026-11-28).
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { handshake } from '../helpers/tls-client.js';

/**
 * docs/configuration.md (TLS): certificates are "picked by SNI (the certificate's names), the
 * first is the default". `b.test.` is the same DNS name as `b.test` (an absolute name), and
 * Node's https (as OpenSSL s_client and Python's ssl) sends the URL's host as is, trailing dot
 * included, while verifying the answer against `b.test` (tls.checkServerIdentity drops the dot).
 * nginx (ngx_http_validate_host) and Go's crypto/tls strip the dot before they match.
 * SniTable.pick (src/tls/material.ts) hands the raw name to X509Certificate.checkHost, which
 * matches nothing with the dot, so the default certificate (localhost) is served and the
 * client's request fails with ERR_TLS_CERT_ALTNAME_INVALID.
 */
describe('TLS SNI: a server name with a trailing dot', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    certs = makeCerts();
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      server: {
        tls: {
          certificates: [
            { cert: certs.server.cert, key: certs.server.key }, // localhost, a.test (the default)
            { cert: certs.other.cert, key: certs.other.key }, // b.test
          ],
        },
      },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
    certs?.cleanup();
  });

  it('the handshake for "b.test." shows the certificate naming b.test, as for "b.test"', async () => {
    expect((await handshake(port, { ca: certs.caPem, servername: 'b.test' })).peer.subject.CN).toBe('b.test');
    expect((await handshake(port, { ca: certs.caPem, servername: 'b.test.' })).peer.subject.CN).toBe('b.test');
  });

  it("Node's https client GET https://b.test.:port/ is served (not ERR_TLS_CERT_ALTNAME_INVALID)", async () => {
    const lookup = ((_h: string, o: { all?: boolean }, cb: (...a: unknown[]) => void) =>
      o?.all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)) as unknown as LookupFunction;
    const got = await new Promise<string>((resolve) => {
      const req = https.get(
        { host: 'b.test.', port, path: '/open/x', ca: certs.caPem, agent: false, lookup },
        (res) => {
          const cn = (res.socket as TLSSocket).getPeerCertificate().subject?.CN;
          res.resume();
          res.on('end', () => resolve(`${res.statusCode} ${cn}`));
        },
      );
      req.on('error', (e: NodeJS.ErrnoException) => resolve(`error ${e.code}`));
    });
    expect(got).toBe('200 b.test');
  });
});
