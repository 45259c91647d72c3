// Regression tests from a review of TLS (2026-11-28): a base64 ticket_keys_file on one line is read as raw bytes.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { handshake } from '../helpers/tls-client.js';
import { manualTlsWatch } from '../helpers/tls-watch.js';

/**
 * docs/configuration.md (Session tickets): ticket_keys_file holds "48 bytes per key, raw or
 * base64, one or more keys". readTicketFile (src/tls/tickets.ts) takes the file as raw bytes
 * whenever its length is a multiple of 48, base64 text or not: the base64 of three keys written
 * on one line (192 characters, `openssl rand 144 | base64 -w0`, a Kubernetes stringData value)
 * becomes four "keys" of ASCII letters, not the three keys it encodes. An instance given the
 * same keys raw (or base64 with a line break) then seals and opens tickets with another key.
 *
 * Proof: a ticket made while the file holds the keys raw must still resume once the file holds
 * the same keys as base64 (with a newline: it does; on one line: it does not).
 */
describe('ticket_keys_file as base64 on one line', () => {
  let certs: TestCerts;
  let t: TestGateway;
  let port: number;
  const watch = manualTlsWatch();
  const keys = randomBytes(144);
  let file: string;

  beforeAll(async () => {
    certs = makeCerts();
    file = `${certs.dir}/tickets.key`;
    writeFileSync(file, keys, { mode: 0o600 });
    t = await startGateway(
      {
        server: {
          tls: { certificates: [{ cert: certs.server.cert, key: certs.server.key }], ticket_keys_file: file },
        },
        routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: 'http://127.0.0.1:9' } }],
      },
      { log: watch.log, tlsWatch: watch.tlsWatch },
    );
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    certs?.cleanup();
  });

  const resumesAfter = async (content: string | Buffer) => {
    writeFileSync(file, keys); // the keys raw: the ticket is sealed with the day's one
    expect((await watch.reloaded()).join('')).toContain('TLS certificates reloaded');
    const first = await handshake(port, { ca: certs.caPem });
    expect(first.session).not.toBeNull();
    writeFileSync(file, content);
    expect((await watch.reloaded()).join('')).toContain('TLS certificates reloaded');
    return (await handshake(port, { ca: certs.caPem, session: first.session as Buffer })).reused;
  };

  it('the same keys as base64 with a line break: the ticket resumes (control)', async () => {
    expect(await resumesAfter(`${keys.toString('base64')}\n`)).toBe(true);
  });

  it('the same keys as base64 on one line (192 characters): the ticket resumes', async () => {
    expect(await resumesAfter(keys.toString('base64'))).toBe(true);
  });
});
