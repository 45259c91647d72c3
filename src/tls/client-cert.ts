import { createHash, X509Certificate } from 'node:crypto';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Exchange } from '../capture/recorder.js';

/** A client certificate as a wake records it and mtls admission reads it. */
export interface ClientCert {
  /** The subject, RFC 4514 style: most specific first, `CN=client-one,O=Example`. */
  subject: string;
  /** SHA-256 of the certificate (DER), lower-case hex without colons. */
  fingerprint: string;
}

const CACHE = Symbol('wakegate.clientCert');
type Cached = { [CACHE]?: ClientCert | null };

/**
 * The verified client certificate of the connection a request came on, or null (plain
 * HTTP, none sent, or one the client CA did not sign, which `client_auth: optional`
 * lets through). Worked out once per connection and kept on the socket: every
 * request after the first on a kept-alive connection pays one property read.
 */
export function clientCert(socket: Socket): ClientCert | null {
  const s = socket as Socket & Cached;
  const hit = s[CACHE];
  if (hit !== undefined) return hit;
  let found: ClientCert | null = null;
  const t = socket as TLSSocket;
  if (t.encrypted === true && t.authorized === true) {
    const raw = t.getPeerCertificate(false)?.raw;
    if (raw && raw.length > 0) {
      found = {
        subject: rfc4514(new X509Certificate(raw).subject),
        fingerprint: createHash('sha256').update(raw).digest('hex'),
      };
    }
  }
  s[CACHE] = found;
  return found;
}

/** Node's subject (one `type=value` a line, most general first) as RFC 4514 writes it: reversed, comma-joined, specials escaped. */
function rfc4514(subject: string): string {
  return subject
    .split('\n')
    .filter((l) => l !== '')
    .reverse()
    .map((l) => {
      const i = l.indexOf('=');
      const value = l.slice(i + 1).replace(/[,+"\\<>;]/g, (c) => `\\${c}`);
      return `${l.slice(0, i)}=${value}`;
    })
    .join(',');
}

/** Records the connection's client certificate, if any, on a request's exchange (its wake). */
export function noteClientCert(socket: Socket, x: Exchange): void {
  const c = clientCert(socket);
  if (c === null) return;
  x.tlsSubject = c.subject;
  x.tlsFingerprint = c.fingerprint;
}
