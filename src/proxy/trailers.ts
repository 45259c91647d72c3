import { carriesGatewayKey, HOP_BY_HOP, isLimitField } from './headers.js';

/**
 * Trailer fields never passed on: the header rules' hop-by-hop and proxy fields, plus
 * credentials, forwarding, the trace context, and the fields that frame or route the
 * message (RFC 9110 §6.5.1). The gateway's own and forwarding prefixes are dropped below, as in headers.
 */
const DROPPED = new Set([
  ...HOP_BY_HOP,
  'authorization',
  'forwarded',
  'host',
  'content-length',
  'content-encoding',
  'content-type',
  // The trace context is the gateway's to send, in the headers (an origin that reads
  // trailers as headers would take the client's instead, which the headers' rules dropped).
  'traceparent',
  'tracestate',
]);

/**
 * A request's trailer fields for the origin, filtered as its headers are: null when
 * one carries a gateway key (in its name or value, in any spelling headers are read
 * in), which refuses the request; otherwise those left once the gateway's own,
 * forwarding, credential and hop-by-hop names are dropped (possibly none).
 */
export function forwardRequestTrailers(raw: string[], named: ReadonlySet<string> | null = null): string[] | null {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    if (carriesGatewayKey(value) || carriesGatewayKey(name)) return null;
    // With _ read as -, as origins that fold it (nginx, CGI and PHP, Django, Rack) read the name.
    const lower = name.toLowerCase();
    const folded = lower.indexOf('_') === -1 ? lower : lower.replaceAll('_', '-');
    if (DROPPED.has(folded) || folded.startsWith('x-wakegate-') || folded.startsWith('x-forwarded-')) continue;
    // A client's own word for its address (nginx realip's field), dropped as in the headers.
    if (folded === 'x-real-ip') continue;
    // Named by the request's Connection: hop-by-hop, in its trailers as in its head (RFC 9110 §7.6.1).
    if (named?.has(lower)) continue;
    out.push(name, value);
  }
  return out;
}

/**
 * An origin's trailer fields for the client, as pairs: those its header fields' rules
 * would pass, less what RFC 9110 §6.5.1 keeps out of a trailer section (framing, routing,
 * content metadata). The gateway's own fields (x-wake-id, x-wakegate-*, and its rate-limit
 * fields when it sent its own: `ownLimits`) are its to write, in the head: an origin's
 * trailer of those names would sit beside them for any client that merges the two.
 * `named`: the fields the head's `Connection` listed (headers.ts connectionTokens).
 */
export function responseTrailerPairs(
  raw: readonly string[],
  ownLimits: boolean,
  named: ReadonlySet<string> | null,
): [string, string][] {
  const pairs: [string, string][] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const lower = name.toLowerCase();
    if (DROPPED.has(lower) || lower === 'x-wake-id' || lower.startsWith('x-wakegate-')) continue;
    // Named by the head's Connection: hop-by-hop, trailer or header (RFC 9110 §7.6.1).
    if (named?.has(lower)) continue;
    if (ownLimits && isLimitField(lower)) continue;
    pairs.push([name, raw[i + 1] ?? '']);
  }
  return pairs;
}

/**
 * A buffered request's header fields for a chunked request whose `trailers` (name, value,
 * ...) follow its body: its Content-Length left out, and the trailer names announced in
 * `Trailer` (RFC 9110 §6.6.2).
 */
export function chunkedWithTrailers(headers: readonly string[], trailers: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i] as string;
    if (name.toLowerCase() === 'content-length') continue;
    out.push(name, headers[i + 1] as string);
  }
  const names: string[] = [];
  for (let i = 0; i < trailers.length; i += 2) names.push(trailers[i] as string);
  if (names.length > 0) out.push('Trailer', names.join(', '));
  return out;
}
