import { basicCredentials, holdsGatewayKey } from '../capture/text.js';
import { boundTracestate } from '../tracing/tracestate.js';
import { headerValue } from './header-value.js';

/**
 * Hop-by-hop header fields (RFC 9110 §7.6.1), which apply to one connection and
 * are never forwarded, plus the fields a proxy consumes itself
 * (Proxy-Authorization, RFC 9110 §11.7.2; Proxy-Connection, a legacy form).
 */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  // An h2c upgrade's settings: hop-by-hop by definition (RFC 7540 §3.2.1), named by Connection or not.
  'http2-settings',
  'proxy-authorization',
  'proxy-authenticate',
  // 100-continue is between the client and this gateway (Node answers it); the
  // origin gets the body as a plain request.
  'expect',
]);

export interface ForwardHeadersOptions {
  /** Drop the Authorization header (the gateway checked the key it carried). */
  dropAuthorization: boolean;
  clientIp: string;
  /** The client is a trusted proxy (server.trusted_proxies): its X-Forwarded-* values are kept and appended to. */
  clientTrusted: boolean;
  proto: string;
  /** Host of the origin, sent as Host. */
  originHost: string;
  /** Identity of the checked key, as x-wakegate-* headers. */
  identity: [keyId: string, consumer: string, environment: string] | null;
  /**
   * W3C Trace Context: the client's `traceparent` is replaced by this one (the gateway's
   * span; null sends none), and its `tracestate` kept only with a valid traceparent
   * (`keepTracestate`). Absent: both pass as they came.
   */
  traceparent?: string | null;
  keepTracestate?: boolean;
  /** The gateway's own `Via` value (admission/via.ts), added after any the client sent. */
  via?: string;
}

/**
 * True when a header value carries a gateway key secret, in any spelling
 * (`%73vc_…` too: key-spelling.ts). Such a value never reaches an origin, whatever the route's
 * `auth`: a client that sends its key to an `auth: none` route must not leak it.
 */
export function carriesGatewayKey(value: string): boolean {
  return holdsGatewayKey(value);
}

/** A gateway key sent as HTTP Basic credentials (`curl -u svc_live_...:`, as some APIs take theirs). */
export function basicHoldsKey(value: string): boolean {
  const credentials = basicCredentials(value);
  return credentials !== null && carriesGatewayKey(credentials);
}

/**
 * Fields named in a Connection header, lower-cased (they are hop-by-hop too), or
 * null when it names none but the hop-by-hop ones (the usual `keep-alive`), so
 * the common request allocates nothing here.
 */
export function connectionTokens(raw: readonly string[]): Set<string> | null {
  let out: Set<string> | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length !== 10 || (name.charCodeAt(0) | 0x20) !== 0x63 || name.toLowerCase() !== 'connection') continue;
    const value = raw[i + 1] as string;
    const lower = value.toLowerCase();
    if (lower === 'keep-alive') continue;
    for (const t of lower.split(',')) {
      const v = t.trim();
      if (!v || HOP_BY_HOP.has(v)) continue;
      out ??= new Set();
      out.add(v);
    }
  }
  return out;
}

/**
 * The families of fields the gateway sets for the origin (its identity headers, replays'
 * x-wakegate-replay-of, X-Forwarded-*, and X-Real-IP: a client's word for its address), whose client-sent fields are never passed as sent.
 * `Forwarded`, `Host` and `traceparent` have no `-` for a `_` to stand in for.
 */
const OWN_PREFIXES = ['x-wakegate-', 'x-forwarded-', 'x-real-ip'] as const;

/**
 * True when a lower-cased field name holding a `_` names one of the gateway's own fields
 * once `_` is read as `-`: nginx (underscores_in_headers on), CGI and PHP
 * (HTTP_X_WAKEGATE_CONSUMER), Django, Rack and Rails fold them, so `X_Wakegate_Consumer: admin`
 * would reach the app as the consumer (ahead of the gateway's own) and `X_Forwarded_For` as
 * the client's address. Compared in place: nothing is allocated.
 */
export function spellsOwn(lower: string): boolean {
  for (const p of OWN_PREFIXES) {
    if (lower.length < p.length) continue;
    let i = 0;
    for (; i < p.length; i++) {
      const c = lower.charCodeAt(i);
      if ((c === 95 ? 45 : c) !== p.charCodeAt(i)) break;
    }
    if (i === p.length) return true;
  }
  return false;
}

/**
 * Request headers for the origin, as a flat raw array (names keep their case and order).
 * X-Forwarded-For/-Proto/-Host and Forwarded are the gateway's own values: a client's
 * are dropped unless it is a trusted proxy, whose chain is then appended to.
 * Client-sent x-wakegate-* are always dropped; the identity of a checked key is added. A
 * client's spelling of any of these with `_` for `-` (spellsOwn) is dropped too, trusted or not.
 */
export function forwardRequestHeaders(raw: string[], o: ForwardHeadersOptions): string[] {
  const named = connectionTokens(raw);
  const out: string[] = [];
  let xff: string | null = null;
  let xfp: string | null = null;
  let xfh: string | null = null;
  let fwd: string | null = null;
  let host = '';
  let states: string[] | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    const lower = name.toLowerCase();
    if (lower === 'host') {
      // Passed on as X-Forwarded-Host: a gateway key the client put there is not (HTTP/2's :authority too).
      if (!carriesGatewayKey(value)) host = value;
      continue;
    }
    if (lower.startsWith('x-forwarded-') || lower === 'forwarded' || lower === 'x-real-ip') {
      // X-Real-IP too (nginx realip's field, which Kong sets): a client's own word for its address.
      if (!o.clientTrusted || carriesGatewayKey(value)) continue;
      if (lower === 'x-forwarded-for') xff = xff === null ? value : `${xff}, ${value}`;
      else if (lower === 'x-forwarded-proto') xfp ??= value;
      else if (lower === 'x-forwarded-host') xfh ??= value;
      else if (lower === 'forwarded') fwd = fwd === null ? value : `${fwd}, ${value}`;
      else out.push(name, value);
      continue;
    }
    if (lower.startsWith('x-wakegate-')) continue;
    // `X_Wakegate_Consumer`, `x_forwarded_for`: read as the gateway's own by origins that take `_`
    // for `-`. Only a name holding a `_` is looked at again.
    if (lower.indexOf('_') !== -1 && spellsOwn(lower)) continue;
    if (lower === 'authorization' && o.dropAuthorization) continue;
    if (lower.length >= 10 && o.traceparent !== undefined) {
      if (isTraceHeader(lower, o.keepTracestate === true)) continue;
      // A kept tracestate goes on as one list within W3C's bounds (tracing/tracestate.ts).
      if (lower === 'tracestate' && !carriesGatewayKey(value)) {
        if (states === null) states = [value];
        else states.push(value);
        continue;
      }
    }
    if (HOP_BY_HOP.has(lower) || named?.has(lower)) continue;
    // A key in the value, in the field's name, or as Basic credentials (which the origin decodes).
    if (carriesGatewayKey(value) || carriesGatewayKey(name)) continue;
    if (lower === 'authorization' && basicHoldsKey(value)) continue;
    out.push(name, value);
  }
  out.push('Host', o.originHost);
  out.push('X-Forwarded-For', xff === null ? o.clientIp : `${xff}, ${o.clientIp}`);
  out.push('X-Forwarded-Proto', xfp ?? o.proto);
  if (xfh !== null || host) out.push('X-Forwarded-Host', xfh ?? host);
  // A trusted proxy's Forwarded chain gains the gateway's hop, as X-Forwarded-For does (RFC 7239 §4).
  if (fwd !== null) out.push('Forwarded', `${fwd}, for=${forwardedNode(o.clientIp)};proto=${o.proto}`);
  if (o.traceparent !== undefined && o.traceparent !== null) out.push('traceparent', o.traceparent);
  if (o.via !== undefined) out.push('Via', o.via);
  const state = states === null ? null : boundTracestate(states);
  if (state !== null) out.push('tracestate', state);
  if (o.identity) {
    // Stored values: percent-encoded (header-value.ts), so none can fail the request or be read trimmed.
    out.push('x-wakegate-key-id', headerValue(o.identity[0]), 'x-wakegate-consumer', headerValue(o.identity[1]));
    out.push('x-wakegate-environment', headerValue(o.identity[2]));
  }
  return out;
}

/** A rate-limit field of the gateway's own (limiter.ts): x-ratelimit-*, RateLimit, RateLimit-Policy. */
export function isLimitField(lower: string): boolean {
  const c = lower.charCodeAt(0);
  if (c === 120) return lower.startsWith('x-ratelimit-');
  return c === 114 && (lower === 'ratelimit' || lower === 'ratelimit-policy');
}

/** An address as a Forwarded node (RFC 7239 §6): an IPv6 one quoted and bracketed. */
function forwardedNode(ip: string): string {
  return ip.indexOf(':') === -1 ? ip : `"[${ip}]"`;
}

/** The client's traceparent (always replaced), or its tracestate when that is not to be kept. */
function isTraceHeader(lower: string, keepState: boolean): boolean {
  return lower === 'traceparent' || (!keepState && lower === 'tracestate');
}

/** undici's raw Buffer headers as strings (latin1, as on the wire). */
export function rawHeaderStrings(raw: Buffer[]): string[] {
  const strings = new Array<string>(raw.length);
  for (let i = 0; i < raw.length; i++) strings[i] = (raw[i] as Buffer).toString('latin1');
  return strings;
}

/**
 * Response headers for the client: the origin's, less hop-by-hop ones (and its rate-limit
 * fields when `ownLimits`: the gateway sends its own), plus `extra`.
 * `Trailer` (RFC 9110 §6.6.2, end to end) is kept only when the client's answer can carry
 * a trailer section (`trailers`: chunked to an HTTP/1.1 client, or HTTP/2; never a HEAD's,
 * a 204's or a 304's, nor anything to an HTTP/1.0 client) and the origin's is not of a
 * known length, so the trailer fields that follow its body reach the client too. Elsewhere
 * no trailer section can follow (node:http refuses to send the field then), and it goes.
 */
export function forwardResponseHeaders(raw: string[], extra: string[], ownLimits = false, trailers = false): string[] {
  const named = connectionTokens(raw);
  const out: string[] = [];
  let trailer: string | null = null;
  let sized = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const lower = name.toLowerCase();
    if (lower.length === 7 && lower === 'trailer') {
      trailer = raw[i + 1] as string;
      continue;
    }
    if (lower.length === 14 && lower === 'content-length') sized = true;
    if (HOP_BY_HOP.has(lower) || named?.has(lower) || lower === 'x-wake-id') continue;
    // `ownLimits`: the gateway's rate-limit fields (in `extra`) describe its bucket, and an
    // origin's own of the same names go (Kong's plugin does the same): one value each.
    if (ownLimits && isLimitField(lower)) continue;
    out.push(name, raw[i + 1] as string);
  }
  if (trailer !== null && trailers && !sized) out.push('Trailer', trailer);
  for (let i = 0; i < extra.length; i++) out.push(extra[i] as string);
  return out;
}

/** Fields a TRACE's reflection leaves out: credentials and cookies (RFC 9110 §9.3.8, "likely to contain sensitive data"). */
const UNREFLECTED: ReadonlySet<string> = new Set(['authorization', 'proxy-authorization', 'cookie']);

/**
 * The content of the gateway's answer to a TRACE it is the final recipient of
 * (`Max-Forwards: 0`, RFC 9110 §7.6.2, §9.3.8): the request as received, as message/http
 * (its request line, then its fields), less those likely to hold sensitive data:
 * credentials, cookies, and any field whose name or value holds a gateway key.
 */
export function reflectedRequest(requestLine: string, raw: readonly string[]): string {
  let out = `${requestLine}\r\n`;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    if (UNREFLECTED.has(name.toLowerCase()) || carriesGatewayKey(value) || carriesGatewayKey(name)) continue;
    out += `${name}: ${value}\r\n`;
  }
  return `${out}\r\n`;
}
