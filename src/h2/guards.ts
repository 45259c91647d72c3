import { METHODS } from 'node:http';
import http2, { type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { errorBody } from '../errors.js';
import type { ResetWindow } from './resets.js';
import { stopUpload } from './stop-upload.js';

/**
 * What both HTTP/2 sides hold every client to, the main edge (edge.ts, Node's core
 * stream API) and the ops and management listeners (console.ts, its compatibility
 * layer): a malformed request is answered 400 and never served, a header list past
 * server.http2_limits.max_header_list_bytes 431, and a session resetting streams past
 * max_resets_per_10s is sent GOAWAY.
 */

const { NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;

/** server.http2_limits. */
export interface H2Limits {
  max_concurrent_streams: number;
  max_header_list_bytes: number;
  max_resets_per_10s: number;
}

/** The methods Node's HTTP/1.1 parser accepts; it refuses any other request as malformed. */
const HTTP1_METHODS: ReadonlySet<string> = new Set(METHODS);

/**
 * Host and :authority both sent, naming different authorities. RFC 9113 §8.3.1 has them
 * compared after scheme-based normalization (RFC 3986 §6.2.3): the host without case, and an
 * empty port, or the scheme's default (80 for http, 443 for https), the same as none, so
 * `localhost`, `localhost:` and `localhost:80` are one authority over http.
 */
function otherHost(h: IncomingHttpHeaders): boolean {
  const host = h.host;
  const authority = h[':authority'];
  // The same string (nearly always, when both come) is decided without a normalized copy.
  if (host === undefined || authority === undefined || host === authority) return false;
  const port = defaultPort(h[':scheme']);
  return normalAuthority(host, port) !== normalAuthority(authority, port);
}

/** The default port of an HTTP/2 :scheme (compared without case), or '' for another scheme. */
function defaultPort(scheme: string | undefined): string {
  if (scheme === undefined) return '';
  const s = scheme.toLowerCase();
  return s === 'https' ? '443' : s === 'http' ? '80' : '';
}

/** An authority lower-cased, its port left out when empty or `dflt`. A `:` inside an IPv6 literal's brackets is no port's. */
function normalAuthority(v: string, dflt: string): string {
  const lower = v.toLowerCase();
  const colon = lower.lastIndexOf(':');
  if (colon === -1 || colon < lower.lastIndexOf(']')) return lower;
  const port = lower.slice(colon + 1);
  return port === '' || port === dflt ? lower.slice(0, colon) : lower;
}

const MALFORMED = JSON.stringify(errorBody('invalid_request', null, 'malformed request'));
const userinfo = (param: string) =>
  JSON.stringify(
    errorBody(
      'invalid_request',
      null,
      `${param} must not hold userinfo (user@host): send credentials in Authorization (RFC 9113 section 8.3.1)`,
      param,
    ),
  );
const USERINFO_AUTHORITY = userinfo(':authority');
const USERINFO_HOST = userinfo('host');

/**
 * The userinfo of an authority (`user:pass@host`), which `:authority` MUST NOT hold (RFC 9113
 * §8.3.1), nor Host (RFC 9110 §7.2: uri-host and port only): its answer, naming the field, or
 * null. No host or port can hold a `@`, so any `@` is userinfo. Only the ops and management
 * listeners answer it here (console.ts); the main edge leaves it to admission (admission/host.ts),
 * which refuses it as over HTTP/1.1: with a wake, drawn from the client's bucket.
 */
export function userinfoAnswer(h: IncomingHttpHeaders): string | null {
  const authority = h[':authority'];
  if (authority !== undefined) return authority.indexOf('@') === -1 ? null : USERINFO_AUTHORITY;
  const host = h.host;
  return host === undefined || host.indexOf('@') === -1 ? null : USERINFO_HOST;
}

/**
 * The 400 body of a malformed request, or null. Any token can be :method in HTTP/2 (of any
 * length, up to the header list): only those HTTP/1.1's parser takes are requests, the others
 * malformed as they are there. A Host naming another authority than :authority is malformed
 * too (RFC 9113 §8.3.1): the gateway and what serves the request must not each read a different
 * one.
 */
export function malformedAnswer(h: IncomingHttpHeaders): string | null {
  return !HTTP1_METHODS.has(h[':method'] as string) || otherHost(h) ? MALFORMED : null;
}

/**
 * A header list's size as RFC 9113 §6.5.2 has it: each field's name and value octets
 * plus 32, pseudo-headers included (Node's strings hold one octet per character).
 */
export function headerListSize(raw: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i++) n += (raw[i] as string).length;
  return n + (raw.length >> 1) * 32;
}

/**
 * The 431 body of a header list past `maxBytes`. Node holds a client to the SETTINGS value
 * only once the client acknowledged it, so each side checks the size itself, as HTTP/1.1's
 * max_header_bytes is checked (431, never served).
 */
export const headerListTooLarge = (maxBytes: number): string =>
  JSON.stringify(
    errorBody(
      'request_header_fields_too_large',
      null,
      `the request's header list is larger than server.http2_limits.max_header_list_bytes (${maxBytes} bytes)`,
    ),
  );

/**
 * The gateway's own error answer to a request it does not serve (no wake). A request body
 * still coming is read and dropped until the answer is out, then its stream is closed with
 * RST_STREAM NO_ERROR (stop-upload.ts), as a proxied answer that ends early is: such a stream
 * is never counted open, so a client dripping DATA on it would otherwise hold its session
 * (each frame refreshes the idle timer) without end. An answer the client's flow control
 * keeps from going out is cut at `limitMs` (server.request_timeout_ms; 0: none) all the same.
 */
export function answer(stream: ServerHttp2Stream, status: number, body: string, limitMs: number): void {
  stream.respond({ ':status': status, 'content-type': 'application/json', 'content-length': body.length });
  stream.end(body);
  if (stream.endAfterHeaders || stream.readableEnded) return;
  stream.resume();
  stream.once('finish', () => stopUpload(stream));
  if (limitMs <= 0) return;
  const timer = setTimeout(() => {
    if (!stream.destroyed && !stream.closed) stream.close(NGHTTP2_CANCEL);
  }, limitMs);
  stream.once('close', () => clearTimeout(timer));
}

/**
 * A header list past max_header_list_bytes was answered 431: true when its session is to be
 * sent GOAWAY ENHANCE_YOUR_CALM (calm(), RFC 9113 §10.5.1), else the 431 counts against the
 * session's reset budget like a reset (it cost a list decoded for nothing). Until a client
 * acknowledges the SETTINGS, Node decodes each of its lists whole into strings however large
 * (its own bound holds only once acknowledged), and the HPACK dynamic table makes that cheap
 * to ask for: one 4 kB field indexed, then named by one byte 2,000 times, is a 2 kB frame
 * that decodes to 8 MB, and 99 of them stalled the process for 1.8 s. Such a client loses its
 * session at its first such list (its 431 still answered); one that acknowledged is held to
 * the limit by Node itself first.
 */
export function tooLarge(session: ServerHttp2Session, resets: ResetWindow, now: number): boolean {
  return session.pendingSettingsAck || resets.reset(now);
}

/** metrics.h2Goaway: the GOAWAYs the gateway sent, by reason. */
export interface GoawayCounter {
  labels(reason: string): { inc(): void };
}

/** How long a session sent GOAWAY for rapid reset keeps its socket, so the GOAWAY is read. */
const CALM_CLOSE_MS = 500;

/**
 * A session past its rapid-reset limit (resets.ts), or sending header lists past the limit
 * (tooLarge): GOAWAY (ENHANCE_YOUR_CALM), counted by `reason`. False when the session had already ended or been told (nothing sent, nothing
 * counted twice).
 */
export function calm(session: ServerHttp2Session, goaway: GoawayCounter, reason = 'rapid_reset'): boolean {
  if (session.destroyed || session.closed) return false;
  goaway.labels(reason).inc();
  // GOAWAY first, the socket closed a moment later: closing at once, with the client's
  // frames still unread, makes the kernel reset the connection and the GOAWAY is lost.
  // Meanwhile nghttp2 ignores every new stream (past the GOAWAY's last stream id).
  session.goaway(NGHTTP2_ENHANCE_YOUR_CALM);
  session.close();
  setTimeout(() => session.destroy(), CALM_CLOSE_MS).unref();
  return true;
}

/**
 * A session closed once idle (no stream open) for `ms` (server.keep_alive_timeout_ms); it
 * also ends a session nghttp2 sent GOAWAY for a bad frame, whose socket Node would keep.
 * Node's timer is refreshed by frames read and data written, and calls setTimeout's callback
 * once: the 'timeout' event is listened to instead, and a timer run out while a stream was
 * open is armed again when the last one closes (a stream the gateway reset writes no frame
 * that would arm it). Streams are counted with `opened` and `closed`.
 */
export class SessionIdle {
  open = 0;
  private missed = false;

  constructor(
    private readonly session: ServerHttp2Session,
    private readonly ms: number,
  ) {
    session.setTimeout(ms);
    session.on('timeout', () => {
      if (this.open === 0) session.destroy();
      else this.missed = true;
    });
  }

  opened(): void {
    this.open++;
  }

  closed(): void {
    if (--this.open === 0 && this.missed && !this.session.destroyed) {
      this.missed = false;
      this.session.setTimeout(this.ms);
    }
  }
}
