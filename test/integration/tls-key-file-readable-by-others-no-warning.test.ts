// Regression tests from a review of TLS (2026-11-28): a certificate's private key that anyone may read is served without a word.
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * docs/security.md (Session tickets): ticket_keys_file "is as sensitive as a private key ... Keep it
 * 0600 (the start warns, once per file, when its group or others may read it)". The start checks
 * only ticket files (exposedTicketFiles, src/tls/tickets.ts, called from src/control.ts): the
 * listener's private key itself, mode 0644, is read and served with no warning at all, though it
 * lets any local user impersonate the gateway (and, without forward secrecy, read its traffic).
 */
describe('server.tls.certificates[].key readable by others', () => {
  let certs: TestCerts;
  let t: TestGateway;
  const lines: string[] = [];

  beforeAll(async () => {
    certs = makeCerts();
    copyFileSync(certs.server.key, `${certs.dir}/open.key`);
    chmodSync(`${certs.dir}/open.key`, 0o644);
    writeFileSync(`${certs.dir}/tickets.key`, randomBytes(48), { mode: 0o644 });
    chmodSync(`${certs.dir}/tickets.key`, 0o644);
    t = await startGateway(
      {
        server: {
          tls: {
            certificates: [{ cert: certs.server.cert, key: `${certs.dir}/open.key` }],
            ticket_keys_file: `${certs.dir}/tickets.key`,
          },
        },
        routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: 'http://127.0.0.1:9' } }],
      },
      { log: createLogger('info', (l) => lines.push(l)), tlsWatch: { watch: () => () => {}, debounceMs: 0 } },
    );
  });
  afterAll(async () => {
    await t?.cleanup();
    certs?.cleanup();
  });

  const warned = () => lines.filter((l) => l.includes('"level":"warn"')).join('\n');

  it('control: the ticket keys file, mode 0644, is warned about', () => {
    expect(warned()).toContain('server.tls.ticket_keys_file');
  });

  it('the start warns, naming the key, as it does for a ticket keys file', () => {
    expect(warned()).toContain('server.tls.certificates[0].key');
  });
});
