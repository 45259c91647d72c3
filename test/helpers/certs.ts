import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A certificate and its key on disk, with their PEM text. */
export interface Pair {
  cert: string;
  key: string;
  certPem: string;
  keyPem: string;
  /** SHA-256 of the DER, lower-case hex without colons (what the gateway records). */
  fingerprint: string;
}

export interface TestCerts {
  dir: string;
  /** The test CA's certificate file (for --cacert and Node's `ca`). */
  ca: string;
  caPem: string;
  /** Names localhost, 127.0.0.1 and a.test. */
  server: Pair;
  /** Names b.test (SNI picks it). */
  other: Pair;
  /** A client certificate (CN=client-one) for mTLS. */
  client: Pair;
  /** Another certificate signed by the same CA: `name` in `file`, with the given SANs (reloads, new origins). */
  make(file: string, cn: string, sans: string[], opts?: { days?: number; ca?: 'test' | 'other' }): Pair;
  /** A CA nobody trusts, to sign what should be refused. */
  otherCa: string;
  cleanup(): void;
}

const openssl = (dir: string, args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });

function newCa(dir: string, name: string, cn: string): void {
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-days',
    '30',
    '-subj',
    `/CN=${cn}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
}

/**
 * Certificates made at test time by `openssl` in a temp directory: a test CA, two
 * server certificates (SNI), a client certificate; nothing checked in.
 */
export function makeCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-certs-'));
  newCa(dir, 'ca', 'wakegate test CA');
  newCa(dir, 'other-ca', 'untrusted CA');
  let serial = 1;
  const make: TestCerts['make'] = (file, cn, sans, opts = {}) => {
    const ca = opts.ca === 'other' ? 'other-ca' : 'ca';
    openssl(dir, [
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      `${file}.key`,
      '-out',
      `${file}.csr`,
      '-subj',
      `/O=wakegate tests/CN=${cn}`,
    ]);
    const ext = sans.length ? `subjectAltName=${sans.join(',')}\n` : '';
    writeFileSync(join(dir, `${file}.ext`), `${ext}extendedKeyUsage=serverAuth,clientAuth\n`);
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${file}.csr`,
      '-CA',
      `${ca}.pem`,
      '-CAkey',
      `${ca}.key`,
      '-set_serial',
      String(++serial + Date.now()),
      '-out',
      `${file}.pem`,
      '-days',
      String(opts.days ?? 10),
      '-extfile',
      `${file}.ext`,
    ]);
    const certPem = readFileSync(join(dir, `${file}.pem`), 'utf8');
    return {
      cert: join(dir, `${file}.pem`),
      key: join(dir, `${file}.key`),
      certPem,
      keyPem: readFileSync(join(dir, `${file}.key`), 'utf8'),
      fingerprint: new X509Certificate(certPem).fingerprint256.replaceAll(':', '').toLowerCase(),
    };
  };
  return {
    dir,
    ca: join(dir, 'ca.pem'),
    caPem: readFileSync(join(dir, 'ca.pem'), 'utf8'),
    otherCa: join(dir, 'other-ca.pem'),
    server: make('server', 'localhost', ['DNS:localhost', 'IP:127.0.0.1', 'DNS:a.test']),
    other: make('other', 'b.test', ['DNS:b.test', 'DNS:*.b.test']),
    client: make('client', 'client-one', []),
    make,
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
