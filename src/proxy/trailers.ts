import http from 'node:http';
import https from 'node:https';
import type { Origin } from '../admission/routes.js';
import { connectOptions } from '../tls/origin-trust.js';
import { carriesGatewayKey, HOP_BY_HOP, isLimitField } from './headers.js';
import type { OriginHandler } from './origin-client.js';

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
export function forwardRequestTrailers(raw: string[]): string[] | null {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    if (carriesGatewayKey(value) || carriesGatewayKey(name)) return null;
    // With _ read as -, as origins that fold it (nginx, CGI and PHP, Django, Rack) read the name.
    const lower = name.toLowerCase();
    const folded = lower.indexOf('_') === -1 ? lower : lower.replaceAll('_', '-');
    if (DROPPED.has(folded) || folded.startsWith('x-wakegate-') || folded.startsWith('x-forwarded-')) continue;
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

const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

/**
 * Forwards a request whose client sent trailer fields after its (buffered) body:
 * undici's client cannot send request trailers, so this one request goes through
 * node:http, chunked, with the trailers after the body (RFC 9112 §7.1.2). The answer
 * is handed to the same handler as any other.
 */
export function forwardWithTrailers(
  o: Origin,
  req: { method: string; path: string; headers: string[]; body: Buffer; trailers: string[] },
  timeoutMs: number,
  h: OriginHandler,
): void {
  const headers: [string, string][] = [];
  for (let i = 0; i < req.headers.length; i += 2) {
    const name = req.headers[i] as string;
    if (name.toLowerCase() === 'content-length') continue;
    headers.push([name, req.headers[i + 1] as string]);
  }
  const names = [];
  for (let i = 0; i < req.trailers.length; i += 2) names.push(req.trailers[i] as string);
  headers.push(['Transfer-Encoding', 'chunked'], ['Trailer', names.join(', ')]);
  let up: http.ClientRequest;
  try {
    up = (o.protocol === 'https:' ? https : http).request({
      host: o.hostname,
      port: o.port,
      method: req.method,
      path: req.path,
      headers: headers.flat(),
      agent: o.protocol === 'https:' ? agents.https : agents.http,
      timeout: timeoutMs,
      ...connectOptions(o.trust),
    });
  } catch (e) {
    // node:http checks fields as it takes them (ERR_INVALID_CHAR): an answer, never a throw out of the handler.
    h.onError(e as Error & { code?: string });
    return;
  }
  let answered = false;
  h.onConnect((err) => up.destroy(err));
  up.on('timeout', () => {
    if (answered) return;
    up.destroy(Object.assign(new Error('headers timeout'), { code: 'UND_ERR_HEADERS_TIMEOUT' }));
  });
  // The handler hears of one failure at most: a second would cut the error answer the first wrote.
  let failed = false;
  const fail = (e: Error & { code?: string }) => {
    if (failed) return;
    failed = true;
    h.onError(e);
  };
  up.on('error', fail);
  up.on('response', (res) => {
    answered = true;
    up.setTimeout(0);
    res.on('error', fail);
    // As undici does for its dispatch handlers: whatever the handler throws (writing the answer
    // to its client) is this request's error, never an exception out of an event listener.
    const broke = (e: unknown) => {
      fail(e as Error & { code?: string });
      res.destroy();
    };
    try {
      h.onHeaders(res.statusCode ?? 502, res.rawHeaders, () => res.resume(), res.statusMessage ?? '');
    } catch (e) {
      return broke(e);
    }
    res.on('data', (c: Buffer) => {
      try {
        if (!h.onData(c)) res.pause();
      } catch (e) {
        broke(e);
      }
    });
    res.on('end', () => {
      try {
        h.onComplete(res.rawTrailers);
      } catch (e) {
        broke(e);
      }
    });
  });
  const trailers: [string, string][] = [];
  for (let i = 0; i < req.trailers.length; i += 2)
    trailers.push([req.trailers[i] as string, req.trailers[i + 1] as string]);
  up.write(req.body);
  try {
    up.addTrailers(trailers);
  } catch (e) {
    up.destroy(e as Error);
    return;
  }
  up.end();
}
