// Regression tests from a review of TLS (2026-11-28): a key of another algorithm than its certificate's passes the load check.
import { execFileSync } from 'node:child_process';
import { copyFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { handshake } from '../helpers/tls-client.js';

/**
 * docs/configuration.md (TLS): "a key that is not its certificate's stops the start with a config
 * error naming it"; "A file that does not load leaves the old certificates serving". readMaterial
 * (src/tls/material.ts) checks the pair with createSecureContext({ cert, key }), which OpenSSL only
 * refuses when the key is of the certificate's type: an RSA (or Ed25519) key beside an EC
 * certificate goes into another slot, "loads", and every handshake after it fails.
 */
describe('TLS reload: a key of another algorithm than the certificate', () => {
  let certs: TestCerts;
  let t: TestGateway;
  let port: number;
  const lines: string[] = [];

  beforeAll(async () => {
    certs = makeCerts(); // EC P-256 certificates
    copyFileSync(certs.server.cert, `${certs.dir}/live.pem`);
    copyFileSync(certs.server.key, `${certs.dir}/live.key`);
    execFileSync('openssl', ['genrsa', '-out', `${certs.dir}/rsa.key`, '2048'], { stdio: 'pipe' });
    t = await startGateway(
      {
        server: { tls: { certificates: [{ cert: `${certs.dir}/live.pem`, key: `${certs.dir}/live.key` }] } },
        routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: 'http://127.0.0.1:9' } }],
      },
      { log: createLogger('info', (l) => lines.push(l)), tlsWatch: { watch: () => () => {}, debounceMs: 0 } },
    );
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    certs?.cleanup();
  });

  it('an RSA key put beside the EC certificate is refused; the old pair serves on', async () => {
    expect((await handshake(port, { ca: certs.caPem })).peer.subject.CN).toBe('localhost');
    copyFileSync(`${certs.dir}/rsa.key`, `${certs.dir}/live.key`);
    const before = lines.length;
    const ok = t.gw.reloadTls();
    const said = lines.slice(before).join('');
    // Whatever the reload said, the listener must still complete handshakes.
    const after = await handshake(port, { ca: certs.caPem }).then(
      (h) => String(h.peer.subject.CN),
      (e: Error) => `handshake failed: ${e.message}`,
    );
    expect(after).toBe('localhost');
    expect(ok).toBe(false);
    expect(said).toContain('server.tls.certificates[0].key');
  });
});
