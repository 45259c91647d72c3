import { METHODS } from 'node:http';
import http2, { type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import { errorBody } from '../errors.js';
import type { Logger } from '../log.js';
import type { ClientRequest, ClientResponse } from '../proxy/client.js';
import { H2Request, H2Response } from './exchange.js';
import { FlushSweep } from './flush-sweep.js';
import { ResetWindow } from './resets.js';

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
 * A header list's size as RFC 9113 §6.5.2 has it: each field's name and value octets
 * plus 32, pseudo-headers included (Node's strings hold one octet per character).
 */
export function headerListSize(raw: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i++) n += (raw[i] as string).length;
  return n + (raw.length >> 1) * 32;
}

const { NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_HTTP_1_1_REQUIRED, NGHTTP2_CANCEL, NGHTTP2_NO_ERROR } = http2.constants;

/** server.http2_limits. */
export interface H2Limits {
  max_concurrent_streams: number;
  max_header_list_bytes: number;
  max_resets_per_10s: number;
}

export interface H2EdgeDeps {
  limits: H2Limits;
  /** A session with no stream open and no frame for this long is closed (server.keep_alive_timeout_ms). */
  idleTimeoutMs: number;
  /** A request body must have arrived whole this long after its headers, else the stream is reset (server.request_timeout_ms; 0: none). */
  requestTimeoutMs: number;
  /** An ended answer its client's flow control keeps from going out for this long is cut (server.send_timeout_ms). */
  sendTimeoutMs: number;
  /** Serves one request: the proxy's handle. */
  handle: (req: ClientRequest, res: ClientResponse, expectsContinue: boolean) => void;
  /** Paths HTTP/2 does not serve here (/v2): reset with HTTP_1_1_REQUIRED, so the client retries on HTTP/1.1. */
  http1Only: (path: string) => boolean;
  goaway: { labels(reason: string): { inc(): void } };
  log: Logger;
  /** Time for the reset window (ms). */
  now: () => number;
  /** Tests only: every answer says which edge thread served it. */
  threadLabel: string | null;
}

/** The HTTP/2 side of an edge: give it a connection whose protocol is h2 (ALPN, or the h2c preface). */
export interface H2Edge {
  accept(socket: Socket): void;
  /** Sessions open now. */
  readonly sessions: number;
  /** GOAWAY to every session (no new streams), the streams in flight finish; what is left at `graceMs` is cut. */
  drain(graceMs: number): Promise<void>;
  close(): void;
}

/** What the edge keeps of one session: its client's socket (the address), its resets, its open streams. */
interface SessionState {
  socket: Socket;
  resets: ResetWindow;
  open: number;
}

const ignore = (): void => {};

/** The gateway's own error answer to a request it does not serve (no wake); what the client still sends is read and dropped. */
function answer(stream: ServerHttp2Stream, status: number, body: string): void {
  stream.respond({ ':status': status, 'content-type': 'application/json', 'content-length': body.length });
  stream.end(body);
  stream.resume();
}

/** How long a session sent GOAWAY for rapid reset keeps its socket, so the GOAWAY is read. */
const CALM_CLOSE_MS = 500;

/**
 * HTTP/2 on Node's core stream API (no compatibility layer: it measured 2.6x the
 * cost per request here): each stream is handed to the proxy as a request like any
 * other (same admission, buckets, capture, errors, forward) through the stand-ins of
 * exchange.ts. Node's own bounds hold the frame-level floods (SETTINGS, PING,
 * session memory, header list size and pairs); this adds the rapid-reset limit.
 */
export function createH2Edge(d: H2EdgeDeps): H2Edge {
  const l = d.limits;
  const TOO_LARGE = JSON.stringify(
    errorBody(
      'request_header_fields_too_large',
      null,
      `the request's header list is larger than server.http2_limits.max_header_list_bytes (${l.max_header_list_bytes} bytes)`,
    ),
  );
  const server = http2.createServer({
    settings: {
      maxConcurrentStreams: l.max_concurrent_streams,
      maxHeaderListSize: l.max_header_list_bytes,
      enablePush: false,
    },
    // As HTTP/1.1's parser allows (Node's default is 128 fields).
    maxHeaderListPairs: 2000,
    // Node's defaults, said here because they are part of the gateway's floods budget:
    // unacknowledged SETTINGS and PINGs, and what a session may hold in nghttp2 (MB).
    maxSettings: 32,
    maxOutstandingPings: 10,
    maxSessionMemory: 10,
  });
  /** Each open session and its client's socket. */
  const sessions = new Map<ServerHttp2Session, Socket>();
  const sweep = new FlushSweep(d.sendTimeoutMs, d.log);
  let pending: Socket | null = null;
  let draining = false;

  server.on('session', (session: ServerHttp2Session) => {
    const st: SessionState = {
      socket: pending as Socket,
      resets: new ResetWindow(l.max_resets_per_10s),
      open: 0,
    };
    sessions.set(session, st.socket);
    session.on('error', ignore);
    session.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, _f: number, raw: string[]) =>
      onStream(session, st, stream, headers, raw),
    );
    session.on('close', () => sessions.delete(session));
    // Idle (no stream open): closed. This also ends a session nghttp2 has sent GOAWAY for a
    // bad frame (FRAME_SIZE_ERROR, garbage), whose socket Node would otherwise keep open.
    session.setTimeout(d.idleTimeoutMs, () => {
      if (st.open === 0) session.destroy();
    });
    if (draining) goaway(session, 'drain');
  });
  // A session's own errors (a bad frame, a socket reset) end that session only.
  server.on('sessionError', (e: Error) => d.log.debug('h2 session error', { err: e.message }));

  const onResetPast = (session: ServerHttp2Session) => {
    if (session.destroyed || session.closed) return;
    d.goaway.labels('rapid_reset').inc();
    d.log.debug('h2 session reset too many streams: GOAWAY');
    // GOAWAY first, the socket closed a moment later: closing at once, with the client's
    // frames still unread, makes the kernel reset the connection and the GOAWAY is lost.
    // Meanwhile nghttp2 ignores every new stream (past the GOAWAY's last stream id).
    session.goaway(NGHTTP2_ENHANCE_YOUR_CALM);
    session.close();
    setTimeout(() => session.destroy(), CALM_CLOSE_MS).unref();
  };

  /** One stream: handed to the proxy as a request, its reset counted if the client cancels it. */
  const onStream = (
    session: ServerHttp2Session,
    st: SessionState,
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    raw: string[],
  ): void => {
    // A write on a stream the client has reset is not the process's concern.
    stream.on('error', ignore);
    if (stream.destroyed) {
      // Reset in the same read as its HEADERS (rapid reset's pattern), whatever its code: counted, never served.
      if (!session.destroyed && st.resets.reset(d.now())) onResetPast(session);
      return;
    }
    // max_header_list_bytes is a SETTINGS value Node holds a client to only once it acknowledged
    // it: checked here too, as HTTP/1.1's max_header_bytes is (431, no wake, never forwarded).
    if (headerListSize(raw) > l.max_header_list_bytes) {
      answer(stream, 431, TOO_LARGE);
      return;
    }
    const path = headers[':path'];
    if (path === undefined || headers[':method'] === 'CONNECT' || d.http1Only(path)) {
      stream.close(NGHTTP2_HTTP_1_1_REQUIRED);
      return;
    }
    // Any token can be :method here (of any length, up to the header list): only those
    // HTTP/1.1's parser takes are requests, the others malformed as they are there (400, no wake).
    // A Host naming another authority than :authority is malformed too (RFC 9113 §8.3.1):
    // the gateway and the origin must not each read a different one.
    if (!HTTP1_METHODS.has(headers[':method'] as string) || otherHost(headers)) {
      answer(stream, 400, MALFORMED);
      return;
    }
    // Userinfo in the authority (`user:pass@host`) is malformed too: never served, nor passed
    // on as X-Forwarded-Host (400 naming the field, no wake).
    const withUserinfo = userinfoIn(headers);
    if (withUserinfo !== null) {
      answer(stream, 400, withUserinfo);
      return;
    }
    st.open++;
    const req = new H2Request(stream, headers, raw, st.socket);
    const res = new H2Response(stream, headers[':method'] === 'HEAD', sweep);
    let timer: NodeJS.Timeout | null = null;
    // The stream's one close listener ('close' comes once): the edge's accounting, then the proxy's (res.closed).
    stream.on('close', () => {
      st.open--;
      if (timer !== null) clearTimeout(timer);
      // A client reset (not the gateway's cut, nor the session's end): counted against the rapid-reset
      // limit. With NO_ERROR too, unless the gateway had ended its answer: a stream closed with both
      // sides' END_STREAM (Node may close it before the answer's 'finish') was answered, and a
      // client that stops reading an answer already made cost nothing a reset could multiply.
      if (!res.cut && !session.destroyed && (stream.rstCode !== NGHTTP2_NO_ERROR || !res.answered)) {
        if (st.resets.reset(d.now())) onResetPast(session);
      }
      res.closed();
    });
    if (d.requestTimeoutMs > 0 && !stream.endAfterHeaders) {
      // HTTP/1.1's request_timeout_ms, per stream: a body that never ends holds nothing for long.
      timer = setTimeout(() => {
        timer = null;
        if (stream.readableEnded || stream.destroyed) return;
        res.cut = true;
        stream.close(NGHTTP2_CANCEL);
      }, d.requestTimeoutMs);
    }
    if (d.threadLabel !== null) res.setHeader('x-wakegate-thread', d.threadLabel);
    // The Expect field's value is case-insensitive (RFC 9110 §10.1.1), as node:http reads it on HTTP/1.1.
    const expect = headers.expect;
    d.handle(req, res, expect !== undefined && expect.toLowerCase() === '100-continue');
  };

  /**
   * Every session ended now, its socket too: a session's destroy ends its socket only once
   * the socket's writes finish, which a client that stopped reading never lets happen (a
   * stop waited for it without end).
   */
  const cutAll = () => {
    for (const [s, socket] of sessions) {
      s.destroy();
      socket.destroy();
    }
  };

  const goaway = (session: ServerHttp2Session, reason: string) => {
    if (session.closed || session.destroyed) return;
    d.goaway.labels(reason).inc();
    session.goaway(NGHTTP2_NO_ERROR);
    session.close();
  };

  return {
    accept(socket) {
      pending = socket;
      server.emit('connection', socket);
      pending = null;
    },
    get sessions() {
      return sessions.size;
    },
    async drain(graceMs) {
      draining = true;
      for (const s of sessions.keys()) goaway(s, 'drain');
      if (sessions.size === 0) return;
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          clearInterval(poll);
          cutAll();
          resolve();
        }, graceMs);
        const poll = setInterval(() => {
          if (sessions.size > 0) return;
          clearInterval(poll);
          clearTimeout(force);
          resolve();
        }, 25);
        force.unref();
      });
    },
    close() {
      cutAll();
      sweep.close();
    },
  };
}
