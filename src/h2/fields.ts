import { validateHeaderName, validateHeaderValue } from 'node:http';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';

/**
 * Connection-specific fields never sent on HTTP/2 (RFC 9113 §8.2.2: a message carrying
 * one is malformed; Node refuses to send it), nor the HTTP/1.1 framing ones.
 */
export const CONNECTION_SPECIFIC: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'http2-settings',
]);

/** Fields Node sends at most once on HTTP/2 (its kSingleValueHeaders, less pseudo-headers). */
const SINGLE_VALUE: ReadonlySet<string> = new Set([
  'access-control-allow-credentials',
  'access-control-max-age',
  'access-control-request-method',
  'age',
  'authorization',
  'content-encoding',
  'content-language',
  'content-length',
  'content-location',
  'content-md5',
  'content-range',
  'content-type',
  'date',
  'dnt',
  'etag',
  'expires',
  'from',
  'host',
  'if-match',
  'if-modified-since',
  'if-none-match',
  'if-range',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'range',
  'referer',
  'retry-after',
  'tk',
  'upgrade-insecure-requests',
  'user-agent',
  'x-content-type-options',
]);

/** Adds raw name/value pairs to HTTP/2 headers (lower-case, repeated names as lists); true when a Trailer field was among them. */
export function addFields(h: OutgoingHttpHeaders, raw: readonly string[]): boolean {
  let trailer = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    if (CONNECTION_SPECIFIC.has(name)) continue;
    if (name === 'trailer') trailer = true;
    addField(h, name, raw[i + 1] as string);
  }
  return trailer;
}

/**
 * Fields of SINGLE_VALUE whose value is a comma-separated list (RFC 9110 §8.4, §8.5, §13.1.1,
 * §13.1.2): several lines of one are one list (§5.3), so they are joined rather than cut to
 * the first. An origin's `Content-Encoding: gzip` and `Content-Encoding: br` is `gzip, br`,
 * which the client needs whole to decode the body.
 */
const JOINED: ReadonlySet<string> = new Set(['content-encoding', 'content-language', 'if-match', 'if-none-match']);

/** Adds one field (`name` lower-case) to HTTP/2 headers: a repeated name as a list. */
function addField(h: OutgoingHttpHeaders, name: string, value: string): void {
  const had = h[name];
  if (had === undefined) h[name] = value;
  // A field HTTP/2 allows once (Node refuses a list): one whose value is a list is joined with
  // ", " (JOINED), any other keeps the first, as most clients read it.
  else if (SINGLE_VALUE.has(name)) {
    if (JOINED.has(name)) h[name] = `${String(had)}, ${value}`;
  } else if (Array.isArray(had)) had.push(value);
  else h[name] = [String(had), value];
}

/**
 * An answer's trailer fields as its last HEADERS frame carries them (RFC 9113 §8.1): the
 * origin's, as HTTP/1.1 passes them on, less the connection-specific ones (§8.2.2: Node
 * refuses to send them), repeated names as lists. Each name and value is checked as
 * node:http's addTrailers checks them on HTTP/1.1: one it refuses throws, here as there,
 * before anything is sent (Node's sendTrailers would throw it out of its 'wantTrailers'
 * event, where nothing catches it, or send what the client then drops).
 */
export function trailerFields(pairs: readonly [string, string][]): OutgoingHttpHeaders {
  const t: OutgoingHttpHeaders = {};
  for (const [name, value] of pairs) {
    validateHeaderName(name);
    validateHeaderValue(name, value);
    const lower = name.toLowerCase();
    if (!CONNECTION_SPECIFIC.has(lower)) addField(t, lower, value);
  }
  return t;
}

/**
 * The request's fields for the origin, from Node's raw list: pseudo-headers left out,
 * `:authority` given as Host when the client sent no Host, Cookie fields joined with
 * "; " (RFC 9113 §8.2.3: an HTTP/1.1 origin expects one).
 */
export function originHeaders(raw: string[]): string[] {
  const out: string[] = [];
  let authority: string | null = null;
  let host = false;
  let cookie = -1;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    if (name.charCodeAt(0) === 58) {
      if (name === ':authority') authority = value;
      continue;
    }
    if (name === 'host') host = true;
    else if (name === 'cookie') {
      if (cookie !== -1) {
        out[cookie] = `${out[cookie]}; ${value}`;
        continue;
      }
      cookie = out.length + 1;
    }
    out.push(name, value);
  }
  if (!host && authority !== null) out.push('host', authority);
  return out;
}

/** HTTP/2 headers (trailers) as a raw name/value list, pseudo-headers left out. */
export function flatten(h: IncomingHttpHeaders): string[] {
  const out: string[] = [];
  for (const name of Object.keys(h)) {
    if (name.charCodeAt(0) === 58) continue;
    const v = h[name];
    if (Array.isArray(v)) for (const one of v) out.push(name, one);
    else if (v !== undefined) out.push(name, v);
  }
  return out;
}
