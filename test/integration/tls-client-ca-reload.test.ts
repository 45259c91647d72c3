import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';
import { type Handshake, handshake } from '../helpers/tls-client.js';
import { manualTlsWatch } from '../helpers/tls-watch.js';

/**
 * A client CA taken away by a reload is taken away from resumed sessions too: a session
 * ticket issued while the old CA was trusted does not let its client skip the
 * certificate check the new one would fail (tickets are bound to the client CA in force).
 */
describe('client_auth: required, the client CA replaced', () => {
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
            min_version: 'TLSv1.3',
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

  const reloaded = async () => (await watch.reloaded()).join('');
  const served = (h: Handshake | null) => h?.response.startsWith('HTTP/1.1 200') === true;
  const asClient = (session?: Buffer) =>
    handshake(port, {
      ca: certs.caPem,
      cert: certs.client.certPem,
      key: certs.client.keyPem,
      path: '/open/x',
      ...(session ? { session } : {}),
    }).catch(() => null);

  it("resumes while the CA is unchanged, and refuses the old CA's client after the reload, resumed or not", async () => {
    const first = await asClient();
    expect(served(first)).toBe(true);
    const session = first?.session as Buffer;
    expect(session).toBeInstanceOf(Buffer);
    const again = await asClient(session);
    expect(again?.reused).toBe(true);
    expect(served(again)).toBe(true);
    // An unrelated reload (the same CA file, rewritten) keeps tickets resuming.
    copyFileSync(certs.ca, live());
    expect(await reloaded()).toContain('TLS certificates reloaded');
    const same = await asClient(session);
    expect(same?.reused).toBe(true);
    expect(served(same)).toBe(true);
    // The CA the client's certificate chains to is no longer trusted.
    copyFileSync(certs.otherCa, live());
    expect(await reloaded()).toContain('TLS certificates reloaded');
    const resumed = await asClient(session);
    expect(resumed?.reused ?? false).toBe(false);
    expect(served(resumed)).toBe(false);
    expect(served(await asClient())).toBe(false);
    // A client of the new CA is served.
    const other = certs.make('new-ca-client', 'new client', [], { ca: 'other' });
    const ok = await handshake(port, { ca: certs.caPem, cert: other.certPem, key: other.keyPem, path: '/open/x' });
    expect(served(ok)).toBe(true);
  });
});
