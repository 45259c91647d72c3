import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';
import { manualTlsWatch } from '../helpers/tls-watch.js';

/** TLS 1.2 specifics of the main listener with client certificates (from a review of the TLS edge). */
describe('TLS 1.2, client_auth: required', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const watch = manualTlsWatch();
  const live = () => join(certs.dir, 'live-client-ca.pem');

  beforeAll(async () => {
    certs = makeCerts();
    copyFileSync(certs.ca, live());
    origin = await echoOrigin();
    t = await startGateway(
      {
        server: {
          tls: {
            certificates: [{ cert: certs.server.cert, key: certs.server.key }],
            client_ca: live(),
            client_auth: 'required',
          },
        },
        routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      },
      { log: watch.log, tlsWatch: watch.tlsWatch },
    );
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
    certs?.cleanup();
  });

  const connect = (session?: Buffer) =>
    new Promise<{ s: tls.TLSSocket; reused: boolean }>((resolve, reject) => {
      const s = tls.connect({
        host: '127.0.0.1',
        port,
        servername: 'localhost',
        ca: certs.caPem,
        cert: certs.client.certPem,
        key: certs.client.keyPem,
        maxVersion: 'TLSv1.2',
        ...(session ? { session } : {}),
      });
      s.once('secureConnect', () => resolve({ s, reused: s.isSessionReused() }));
      s.once('error', reject);
    });

  // nginx (ssl_renegotiation off since 0.8.23) and Envoy (BoringSSL) refuse client-initiated renegotiation.
  it('refuses a client-initiated renegotiation', async () => {
    const { s } = await connect();
    const err = await new Promise<Error | null>((resolve) => {
      s.once('error', (e) => resolve(e));
      // The gateway cuts the connection: refused as surely as with an alert.
      s.once('close', () => resolve(new Error('closed by the gateway')));
      const ok = s.renegotiate({ rejectUnauthorized: false }, (e) => resolve(e ?? null));
      if (!ok) resolve(new Error('renegotiate not started'));
    });
    s.destroy();
    expect(err).not.toBeNull();
    // The listener serves the next connection as before.
    const next = await connect();
    expect(next.s.authorized).toBe(true);
    next.s.destroy();
  });
});
