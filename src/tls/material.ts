import { createPrivateKey, X509Certificate } from 'node:crypto';
import { createSecureContext, type SecureContext } from 'node:tls';
import { ConfigError } from '../config/index.js';
import type { ListenerTls } from '../config/tls-schema.js';
import { firstLine, MAX_PEM_BYTES, readBounded, readCaFile } from './files.js';
import { readTicketFile, type TicketSource } from './tickets.js';

/**
 * What a TLS listener serves, read from its files: each certificate chain and key
 * (PEM text, so it crosses to the edge threads as it is), the client CAs and the
 * `ticket_keys_file`'s keys. Read whole and checked before anything serves it, at
 * start and on every reload.
 */
export interface TlsMaterial {
  certs: { cert: string; key: string }[];
  ca: string | null;
  /** Each certificate's notAfter (ms since the epoch), by index. */
  expiries: number[];
  /**
   * The session-ticket keys of `ticket_keys_file`, read with the certificates so a
   * reload replaces them wherever the listener is served. Absent without that file:
   * the listener keeps the process's own keys (made once, at start).
   */
  tickets?: TicketSource;
}

/** Reads and checks every file of a `tls` block; a problem is a ConfigError naming its key (`at` is the block's path). */
export function readMaterial(t: ListenerTls, at: string): TlsMaterial {
  const expiries: number[] = [];
  const certs = t.certificates.map((c, i) => {
    const where = `${at}.certificates[${i}]`;
    const pair = { cert: readText(c.cert, `${where}.cert`), key: readText(c.key, `${where}.key`) };
    try {
      expiries.push(Date.parse(new X509Certificate(pair.cert).validTo));
    } catch (e) {
      throw new ConfigError(`${where}.cert`, `${c.cert} is not a PEM certificate: ${firstLine(e)}`);
    }
    try {
      // Loads both and checks that the key is the certificate's (OpenSSL: "key values mismatch").
      createSecureContext(pair);
    } catch (e) {
      throw new ConfigError(`${where}.key`, `${c.key} does not load with ${c.cert}: ${firstLine(e)}`);
    }
    // OpenSSL compares a key with the certificate of its own type only: a key of another
    // algorithm (RSA beside an EC certificate) loads, and every handshake then fails.
    let matches = false;
    try {
      matches = new X509Certificate(pair.cert).checkPrivateKey(createPrivateKey(pair.key));
    } catch {}
    if (!matches) throw new ConfigError(`${where}.key`, `${c.key} is not the private key of ${c.cert}`);
    return pair;
  });
  let ca: string | null = null;
  if (t.client_ca !== null) {
    ca = readCaFile(t.client_ca, `${at}.client_ca`);
  }
  if (t.ticket_keys_file === null) return { certs, ca, expiries };
  return { certs, ca, expiries, tickets: readTicketFile(t.ticket_keys_file, `${at}.ticket_keys_file`) };
}

/** The files a reload watches. */
export function filesOf(t: ListenerTls): string[] {
  const out = t.certificates.flatMap((c) => [c.cert, c.key]);
  if (t.client_ca !== null) out.push(t.client_ca);
  if (t.ticket_keys_file !== null) out.push(t.ticket_keys_file);
  return out;
}

function readText(file: string, path: string): string {
  return readBounded(file, path, MAX_PEM_BYTES).toString('utf8');
}

/**
 * The contexts a handshake picks from by SNI: the certificate whose names match the
 * server name the client sent (wildcards as RFC 6125 has them), else the first.
 * Answers are remembered per name (a bounded map: names are the client's to choose).
 */
export class SniTable {
  private readonly contexts: SecureContext[];
  private readonly x509: X509Certificate[];
  private readonly seen = new Map<string, SecureContext | null>();

  constructor(m: TlsMaterial, extra: { ca?: string; sessionIdContext?: string }) {
    this.contexts = m.certs.map((c) => createSecureContext({ ...c, ...extra }));
    this.x509 = m.certs.map((c) => new X509Certificate(c.cert));
  }

  /**
   * The context for `name`: the first certificate, in the order configured, whose names
   * match it; null: the default (the first certificate), matched or not.
   */
  pick(sent: string): SecureContext | null {
    // One certificate: nothing to choose, nothing to remember.
    if (this.x509.length === 1) return null;
    // `b.test.` is the name `b.test` (the root's empty label written out): matched as nginx and Go do.
    const name = sent.endsWith('.') ? sent.slice(0, -1) : sent;
    const hit = this.seen.get(name);
    if (hit !== undefined) return hit;
    let found: SecureContext | null = null;
    // From the first: a name the default certificate matches is served it, even if a later one matches too.
    for (let i = 0; i < this.x509.length; i++) {
      if ((this.x509[i] as X509Certificate).checkHost(name) !== undefined) {
        found = i === 0 ? null : (this.contexts[i] as SecureContext);
        break;
      }
    }
    if (this.seen.size >= 1024) this.seen.clear();
    this.seen.set(name, found);
    return found;
  }
}
