import net from 'node:net';
import { GatewayError } from '../errors.js';

/**
 * The request's authority (Host, or HTTP/2's `:authority`), checked before anything else
 * is read: RFC 9112 §3.2 has a server answer 400 to an HTTP/1.1 request without Host, with
 * more than one Host line, or with an invalid one; RFC 9113 §8.3.1 the same of an HTTP/2
 * request of an `http`/`https` target with neither `:authority` nor Host. A valid value is
 * uri-host [":" port] (RFC 9110 §7.2, RFC 3986 §3.2.2), nothing else: what passes here is
 * what the origin reads as X-Forwarded-Host, the field it builds absolute URLs from
 * (redirects, password-reset links). An HTTP/1.0 request may come without one.
 */

/** reg-name's characters (RFC 3986 §3.2.2): unreserved and sub-delims; `%` is read as pct-encoded apart. */
const REG_NAME = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=")
  REG_NAME[c.charCodeAt(0)] = 1;

const isHex = (c: number): boolean => (c >= 48 && c <= 57) || ((c | 32) >= 97 && (c | 32) <= 102);

/**
 * Whether `v` is uri-host [":" port]: a reg-name (an IPv4 address is one), or an IPv6 or
 * IPvFuture literal in brackets, then an optional `:` and digits. The host must not be
 * empty (an http(s) URI's may not be, RFC 9110 §4.2.1). One scan, nothing allocated but
 * for an IPv6 literal.
 */
export function validAuthority(v: string): boolean {
  const n = v.length;
  let i = 0;
  if (n !== 0 && v.charCodeAt(0) === 91 /* [ */) {
    const close = v.indexOf(']', 1);
    if (close === -1 || !ipLiteral(v, close)) return false;
    i = close + 1;
  } else {
    while (i < n) {
      const c = v.charCodeAt(i);
      if (c < 128 && REG_NAME[c] === 1) i++;
      else if (c === 37 /* % */ && i + 2 < n && isHex(v.charCodeAt(i + 1)) && isHex(v.charCodeAt(i + 2))) i += 3;
      else break;
    }
    if (i === 0) return false;
  }
  if (i === n) return true;
  if (v.charCodeAt(i) !== 58 /* : */) return false;
  for (i++; i < n; i++) {
    const c = v.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/** IP-literal's inside, `v[1..close)`: IPv6address (no zone: RFC 9110 has none), or IPvFuture. */
function ipLiteral(v: string, close: number): boolean {
  if ((v.charCodeAt(1) | 32) === 118 /* v */) {
    // IPvFuture = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )
    let i = 2;
    while (i < close && isHex(v.charCodeAt(i))) i++;
    if (i === 2 || i >= close || v.charCodeAt(i) !== 46) return false;
    if (++i === close) return false;
    for (; i < close; i++) {
      const c = v.charCodeAt(i);
      if (c !== 58 && (c >= 128 || REG_NAME[c] !== 1)) return false;
    }
    return true;
  }
  const inner = v.slice(1, close);
  return inner.indexOf('%') === -1 && net.isIPv6(inner);
}

/** The refusals, one set per field the client named its authority in. */
interface HostErrors {
  readonly missing: GatewayError;
  readonly userinfo: GatewayError;
  readonly invalid: GatewayError;
}

const hostErrors = (param: 'host' | ':authority', missing: string, rfc: string): HostErrors => ({
  missing: new GatewayError('invalid_request', missing, param),
  userinfo: new GatewayError(
    'invalid_request',
    `${param} must not hold userinfo (user@host): send credentials in Authorization (${rfc})`,
    param,
  ),
  invalid: new GatewayError(
    'invalid_request',
    `${param} must be a host and an optional port, such as example.com or example.com:8443 (${rfc}; RFC 3986 section 3.2.2)`,
    param,
  ),
});

const HOST = hostErrors(
  'host',
  'an HTTP/1.1 request must send Host, such as Host: example.com (RFC 9112 section 3.2)',
  'RFC 9110 section 7.2',
);
const HOST_TWICE = new GatewayError(
  'invalid_request',
  'host must be sent once (RFC 9112 section 3.2): this request has more than one Host line',
  'host',
);
const AUTHORITY = hostErrors(
  ':authority',
  'an http or https request must send :authority or Host (RFC 9113 section 8.3.1)',
  'RFC 9113 section 8.3.1',
);

/** The refusal of one authority value, or null. Any `@` is userinfo: no host or port holds one. */
const valueProblem = (v: string, e: HostErrors): GatewayError | null =>
  validAuthority(v) ? null : v.indexOf('@') !== -1 ? e.userinfo : e.invalid;

/** The request fields the rule reads: its version and headers, and Node's raw list when there is one. */
export interface HostFields {
  readonly headers: { readonly host?: string | undefined; readonly [name: string]: unknown };
  /** Name, value, ...: HTTP/1.1's as sent; an HTTP/2 request's (h2/fields.ts originHeaders: `:authority` as host). */
  readonly rawHeaders?: readonly string[] | undefined;
  readonly httpVersionMajor?: number | undefined;
  readonly httpVersionMinor?: number | undefined;
}

/** Whether an HTTP/2 :scheme is one with a mandatory authority (http, https; RFC 9113 §8.3.1). */
function authorityScheme(scheme: unknown): boolean {
  if (scheme === 'http' || scheme === 'https') return true;
  return typeof scheme === 'string' && (scheme.length === 4 || scheme.length === 5) && /^https?$/i.test(scheme);
}

/**
 * What is wrong with a request's authority, or null: the Host lines (raw name, value, ...)
 * in one pass over the names, each value scanned once. Required over HTTP/1.1 and over
 * HTTP/2 for an http(s) target; a request that does not say its version (a caller's
 * stand-in) is held to a Host it sent, not made to send one. Over HTTP/2 a refusal names
 * `:authority` when the client sent one (Host, if sent too, is the same: h2/edge.ts).
 */
export function hostProblem(req: HostFields): GatewayError | null {
  const major = req.httpVersionMajor;
  const h2 = major === 2;
  const e = h2 && req.headers[':authority'] !== undefined ? AUTHORITY : HOST;
  const raw = req.rawHeaders;
  // A Host line seen; any authority seen (HTTP/2's `:authority` too).
  let host = false;
  let seen = false;
  if (raw !== undefined) {
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const n = raw[i] as string;
      if (n.length === 4) {
        if (
          (n.charCodeAt(0) | 32) !== 104 ||
          (n.charCodeAt(1) | 32) !== 111 ||
          (n.charCodeAt(2) | 32) !== 115 ||
          (n.charCodeAt(3) | 32) !== 116
        )
          continue;
        if (host) return HOST_TWICE;
        host = true;
      } else if (n.length !== 10 || n !== ':authority') {
        // `:authority` is in the list of an HTTP/2 request through the compatibility layer (the console's listeners).
        continue;
      }
      seen = true;
      const bad = valueProblem(raw[i + 1] as string, e);
      if (bad !== null) return bad;
    }
  } else {
    // No raw list (a caller's stand-in): the headers object's Host and :authority.
    const { host: h, ':authority': a } = req.headers;
    for (const v of [h, a]) {
      if (typeof v !== 'string') continue;
      seen = true;
      const bad = valueProblem(v, e);
      if (bad !== null) return bad;
    }
  }
  if (seen || major === undefined) return null;
  if (major === 1) return req.httpVersionMinor === 0 ? null : HOST.missing;
  return h2 && authorityScheme(req.headers[':scheme']) ? AUTHORITY.missing : null;
}
