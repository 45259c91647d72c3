import { METHODS } from 'node:http';
import http2, { type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { errorBody } from '../errors.js';

/**
 * What both HTTP/2 sides hold every client to, the main edge (edge.ts, Node's core
 * stream API) and the ops and management listeners (console.ts, its compatibility
 * layer): a malformed request is answered 400 and never served, a header list past
 * server.http2_limits.max_header_list_bytes 431, and a session resetting streams past
 * max_resets_per_10s is sent GOAWAY.
 */

const { NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;

/** server.http2_limits. */
export interface H2Limits {
  max_concurrent_streams: number;
  max_header_list_bytes: number;
  max_resets_per_10s: number;
}

/** The methods Node's HTTP/1.1 parser accepts; it refuses any other request as malformed. */
const HTTP1_METHODS: ReadonlySet<string> = new Set(METHODS);

/** Host and :authority both sent, naming different authorities (compared without case). */
function otherHost(h: IncomingHttpHeaders): boolean {
  const host = h.host;
  const authority = h[':authority'];
  // The same string (nearly always, when both come) is decided without a lower-cased copy.
  if (host === undefined || authority === undefined || host === authority) return false;
  return host.length !== authority.length || host.toLowerCase() !== authority.toLowerCase();
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
 * null. No host or port can hold a `@`, so any `@` is userinfo.
 */
function userinfoIn(h: IncomingHttpHeaders): string | null {
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
 * one. Userinfo in the authority is refused naming its field: never served, nor passed on.
 */
export function malformedAnswer(h: IncomingHttpHeaders): string | null {
  if (!HTTP1_METHODS.has(h[':method'] as string) || otherHost(h)) return MALFORMED;
  return userinfoIn(h);
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

/** The gateway's own error answer to a request it does not serve (no wake); what the client still sends is read and dropped. */
export function answer(stream: ServerHttp2Stream, status: number, body: string): void {
  stream.respond({ ':status': status, 'content-type': 'application/json', 'content-length': body.length });
  stream.end(body);
  stream.resume();
}

/** metrics.h2Goaway: the GOAWAYs the gateway sent, by reason. */
export interface GoawayCounter {
  labels(reason: string): { inc(): void };
}

/** How long a session sent GOAWAY for rapid reset keeps its socket, so the GOAWAY is read. */
const CALM_CLOSE_MS = 500;

/**
 * A session past its rapid-reset limit (resets.ts): GOAWAY (ENHANCE_YOUR_CALM), counted as
 * rapid_reset. False when the session had already ended or been told (nothing sent, nothing
 * counted twice).
 */
export function calm(session: ServerHttp2Session, goaway: GoawayCounter): boolean {
  if (session.destroyed || session.closed) return false;
  goaway.labels('rapid_reset').inc();
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
