import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../errors.js';
import { validAuthority } from './host.js';

/**
 * A request target in absolute-form (`GET http://api.example/v1/x HTTP/1.1`), which a
 * server must accept (RFC 9112 §3.2.2), turned into origin-form before anything reads
 * the request: `req.url` becomes its path and query, and its authority becomes the one
 * Host line (the Host the client sent, if any, is ignored: RFC 9112 §3.2.2), so the route
 * match, the key scan, the wake and X-Forwarded-Host all see one request. Only `http` and
 * `https` targets with a valid uri-host[:port] and no userinfo are taken; anything else is
 * left as it came, for admission to refuse (routes.ts, unsafePath). The common
 * origin-form target costs one character read.
 */
export function toOriginForm(req: IncomingMessage): void {
  const url = req.url;
  // CONNECT's target is authority-form only (RFC 9112 §3.2.3): left for its own refusal.
  if (url === undefined || url.charCodeAt(0) === 47 /* / */ || req.method === 'CONNECT') return;
  const schemeEnd = schemeLength(url);
  if (schemeEnd === 0) return;
  let end = schemeEnd;
  while (end < url.length) {
    const c = url.charCodeAt(end);
    if (c === 47 /* / */ || c === 63 /* ? */ || c === 35 /* # */) break;
    end++;
  }
  const authority = url.slice(schemeEnd, end);
  // userinfo (`user:pass@host`) has no place in an http(s) target (RFC 9110 §4.2.4); validAuthority refuses `@`.
  if (!validAuthority(authority)) return;
  const rest = url.slice(end);
  // The headers object is made from rawHeaders on first read, counting the lines it had then: made first.
  const headers = req.headers;
  const raw = req.rawHeaders;
  const kept: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const n = raw[i] as string;
    if (n.length === 4 && n.toLowerCase() === 'host') continue;
    kept.push(n, raw[i + 1] as string);
  }
  kept.push('Host', authority);
  req.rawHeaders = kept;
  headers.host = authority;
  req.url = rest === '' ? '/' : rest.charCodeAt(0) === 47 ? rest : `/${rest}`;
}

/** The length of a leading `http://` or `https://` (any case), or 0. */
function schemeLength(url: string): number {
  const lower = url.slice(0, 8).toLowerCase();
  if (lower.startsWith('http://')) return 7;
  if (lower.startsWith('https://')) return 8;
  return 0;
}

/** 501, not 400: the request may be well formed, in a coding the gateway does not read (RFC 9112 §6.1). */
class NotImplemented extends GatewayError {
  override readonly status: number = 501;
}

const CODING_REFUSED = new NotImplemented(
  'invalid_request',
  'the request body is sent in a transfer coding the gateway does not decode; send it with Transfer-Encoding: chunked alone (a Content-Encoding is read)',
  'transfer-encoding',
);

/** A request whose body's length cannot be known: answered 400, and its connection closed (ProxyHandler.fail). */
export const FRAMING_REFUSED = new GatewayError(
  'invalid_request',
  "the request's Transfer-Encoding does not end in chunked, so its body's length cannot be known (RFC 9112 §6.3); send Transfer-Encoding: chunked alone, or a Content-Length",
  'transfer-encoding',
);

/**
 * A request's Transfer-Encoding other than `chunked` alone. `gzip, chunked`: the parser
 * takes the chunks off and leaves the rest encoded, so the origin would read compressed
 * bytes as the body, and the key scan would read what the origin never decodes: 501, as
 * nginx answers. No `chunked` last (`gzip`): the parser reads no body at all, and what
 * the client sent as one would be read as the next request: 400, and the connection is
 * closed (RFC 9112 §6.3). (`chunked` before another coding is the parser's 400.)
 */
export function codingProblem(te: string | undefined): GatewayError | null {
  if (te === undefined || te === 'chunked') return null;
  // A list's empty elements are no codings (RFC 9110 §5.6.1): `, chunked` is chunked alone.
  const codings = te
    .toLowerCase()
    .split(',')
    .map((c) => c.trim())
    .filter((c) => c !== '');
  if (codings.length === 1 && codings[0] === 'chunked') return null;
  return codings.at(-1) === 'chunked' ? CODING_REFUSED : FRAMING_REFUSED;
}
