import type { Config } from '../config/index.js';
import type { OriginTls } from '../config/tls-schema.js';
import { readCaFile } from './files.js';

/** How a route's https:// origins are verified (routes[].tls), read once at start. */
export interface OriginTrust {
  /** PEM of the CAs to trust instead of the system's; null: the system CAs. */
  ca: string | null;
  /** The name sent by SNI and checked against the certificate; null: the origin URL's host. */
  servername: string | null;
  /** False only with insecure_skip_verify (tests). */
  verify: boolean;
  /** Tells pools of different trust apart. */
  id: string;
}

/** A route's `tls` block as its origins use it; null: the defaults (system CAs, the URL's host name). */
export function originTrust(t: OriginTls | null | undefined, at: string): OriginTrust | null {
  if (!t) return null;
  let ca: string | null = null;
  if (t.ca !== null) {
    // At least one certificate: an empty file given as `ca` must not fall back to the system's CAs.
    ca = readCaFile(t.ca, `${at}.ca`);
  }
  return {
    ca,
    servername: t.servername,
    verify: !t.insecure_skip_verify,
    id: `${t.ca ?? ''}|${t.servername ?? ''}|${t.insecure_skip_verify ? 'insecure' : ''}`,
  };
}

/** The TLS options of a connection to an origin of this trust (undici's `connect`, https.request). */
export function connectOptions(t: OriginTrust | null): {
  ca?: string;
  servername?: string;
  rejectUnauthorized?: boolean;
} {
  if (t === null) return {};
  return {
    ...(t.ca !== null ? { ca: t.ca } : {}),
    ...(t.servername !== null ? { servername: t.servername } : {}),
    ...(t.verify ? {} : { rejectUnauthorized: false }),
  };
}

/** The start's warnings: every route whose origins' certificates are not checked. */
export function insecureOrigins(cfg: Readonly<Config>): string | null {
  const names = cfg.routes.filter((r) => r.tls?.insecure_skip_verify).map((r) => r.name);
  const lines: string[] = [];
  if (names.length > 0)
    lines.push(
      `routes ${names.join(', ')}: tls.insecure_skip_verify is set; their origins' certificates are not checked (for tests only: anyone on the path can answer as the origin)`,
    );
  if (cfg.tracing.tls?.insecure_skip_verify)
    lines.push(
      "tracing.tls.insecure_skip_verify is set; the collector's certificate is not checked (for tests only: anyone on the path can take the spans and the collector's token)",
    );
  return lines.length === 0 ? null : lines.join('; ');
}

/** OpenSSL's verification failures, as Node codes them: the origin's certificate, not the network. */
const VERIFY = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_GET_ISSUER_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
]);
export const isVerifyError = (code: string | undefined): boolean => code !== undefined && VERIFY.has(code);
