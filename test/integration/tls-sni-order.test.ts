import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type Pair, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { handshake } from '../helpers/tls-client.js';

/**
 * server.tls.certificates are "picked by SNI (the certificate's names), the first is the
 * default": the first certificate, in the order configured, whose names match the server
 * name is served, the first one included (it was once skipped, so a name it names exactly
 * was served a later wildcard that also covers it).
 */
describe('TLS: SNI picks the first matching certificate, in the order configured', () => {
  let certs: TestCerts;
  let exact: Pair;
  let wild: Pair;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    certs = makeCerts();
    exact = certs.make('exact', 'api.example.test', ['DNS:api.example.test']);
    wild = certs.make('wild', 'wildcard', ['DNS:*.example.test']);
    t = await startGateway({
      server: {
        tls: {
          certificates: [
            { cert: exact.cert, key: exact.key },
            { cert: wild.cert, key: wild.key },
          ],
        },
      },
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    certs?.cleanup();
  });

  const served = async (servername: string) => (await handshake(port, { ca: certs.caPem, servername })).peer.subject.CN;

  it('a name the first certificate names is served the first, though a later wildcard covers it too', async () => {
    expect(await served('api.example.test')).toBe('api.example.test');
    // Asked again (the answer per name is remembered): the same.
    expect(await served('api.example.test')).toBe('api.example.test');
  });

  it('a name only the later wildcard covers is served the wildcard', async () => {
    expect(await served('www.example.test')).toBe('wildcard');
  });
});
