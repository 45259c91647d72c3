import type http from 'node:http';
import http2, { type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type tls from 'node:tls';
import {
  answer,
  calm,
  type GoawayCounter,
  type H2Limits,
  headerListSize,
  headerListTooLarge,
  malformedAnswer,
  SessionIdle,
  tooLarge,
  userinfoAnswer,
} from './guards.js';
import { ResetWindow } from './resets.js';

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR } = http2.constants;

export interface ConsoleH2Deps {
  /** The HTTP/1.1 server whose 'request' handlers serve each stream. */
  http: http.Server;
  /** server.http2_limits, as the main listener's HTTP/2 holds them (guards.ts). */
  limits: H2Limits;
  /** A session with no stream open and no frame for this long is closed (server.keep_alive_timeout_ms). */
  idleTimeoutMs: number;
  /** A request body must have arrived whole this long after its headers, else the stream is reset (server.request_timeout_ms; 0: none). */
  requestTimeoutMs: number;
  /** metrics.h2Goaway: a session past max_resets_per_10s counts as rapid_reset, as on the main listener. */
  goaway: GoawayCounter;
}

/** What is kept of one session: its resets, and its idle close (which counts its streams handed on). */
interface SessionState {
  session: ServerHttp2Session;
  resets: ResetWindow;
  idle: SessionIdle;
}

const ignore = (): void => {};

/**
 * HTTP/2 on the ops and management listeners (the console and /v2 in a browser):
 * the compatibility layer, whose request and response stand in for HTTP/1.1's, so
 * their HTTP server's own handler serves them unchanged. These listeners carry an
 * operator's few requests, not the proxied traffic, so its cost per request (2.6x
 * the core stream API's, measured) does not matter here and one handler does. Each
 * stream is first held to what the main listener's HTTP/2 holds it to (guards.ts):
 * a malformed request or a header list too large is answered and never served, and
 * a session resetting streams past max_resets_per_10s is sent GOAWAY.
 */
export function consoleH2(d: ConsoleH2Deps): (socket: tls.TLSSocket) => void {
  const l = d.limits;
  const TOO_LARGE = headerListTooLarge(l.max_header_list_bytes);
  const h2 = http2.createServer({
    settings: {
      maxConcurrentStreams: l.max_concurrent_streams,
      maxHeaderListSize: l.max_header_list_bytes,
      enablePush: false,
    },
    maxSessionMemory: 16,
  });
  // The compatibility layer on a server that never listens: Node installs it as a server's
  // 'stream' handler once that server has a 'request' listener, and on `h2` itself it would
  // serve every stream before the checks below could refuse one. Here a stream reaches it
  // (and the HTTP server's handler) only when handed over, past them.
  const compat = http2.createServer();
  compat.on('request', (req, res) => d.http.emit('request', req, res));

  const onReset = (st: SessionState) => {
    if (!st.session.destroyed && st.resets.reset(performance.now())) calm(st.session, d.goaway);
  };
  const onStream = (st: SessionState, o: IncomingStream) => {
    const { stream, headers, raw } = o;
    // A write on a stream the client has reset is not the process's concern.
    stream.on('error', ignore);
    // Reset in the same read as its HEADERS (rapid reset's pattern), whatever its code: counted, never served.
    if (stream.destroyed) return onReset(st);
    // Node holds a client to max_header_list_bytes only once it acknowledged the SETTINGS (guards.ts).
    if (headerListSize(raw) > l.max_header_list_bytes) {
      answer(stream, 431, TOO_LARGE, d.requestTimeoutMs);
      // A client that never acknowledged the SETTINGS loses its session (guards.ts tooLarge).
      if (!st.session.destroyed && tooLarge(st.session, st.resets, performance.now()))
        calm(st.session, d.goaway, 'header_list');
      return;
    }
    const malformed = malformedAnswer(headers) ?? userinfoAnswer(headers);
    if (malformed !== null) return answer(stream, 400, malformed, d.requestTimeoutMs);
    st.idle.opened();
    track(stream, d.requestTimeoutMs, (reset) => {
      if (reset) onReset(st);
      st.idle.closed();
    });
    compat.emit('stream', stream, headers, o.flags, raw);
  };

  h2.on('session', (session: ServerHttp2Session) => {
    const st: SessionState = {
      session,
      resets: new ResetWindow(l.max_resets_per_10s),
      idle: new SessionIdle(session, d.idleTimeoutMs),
    };
    session.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, raw: string[]) =>
      onStream(st, { stream, headers, flags, raw }),
    );
  });
  // A session that fails (a bad frame, the client gone) ends by itself; nothing to log.
  h2.on('sessionError', ignore);
  return (socket) => h2.emit('connection', socket);
}

/** A stream as its session's 'stream' event gives it. */
interface IncomingStream {
  stream: ServerHttp2Stream;
  headers: IncomingHttpHeaders;
  flags: number;
  raw: string[];
}

/**
 * A stream handed to the compatibility layer: its request body cut at `requestTimeoutMs`
 * (server.request_timeout_ms, as HTTP/1.1's), and `closed` told once it closes whether
 * that was a client's reset, as the main listener counts them (edge.ts).
 */
function track(stream: ServerHttp2Stream, requestTimeoutMs: number, closed: (reset: boolean) => void): void {
  let cut = false;
  // Node says 'aborted' when a stream closes before its answer was ended: a reset, with any code.
  let unanswered = false;
  stream.once('aborted', () => {
    unanswered = true;
  });
  const timer =
    requestTimeoutMs > 0 && !stream.endAfterHeaders
      ? setTimeout(() => {
          if (stream.readableEnded || stream.destroyed) return;
          cut = true;
          stream.close(NGHTTP2_CANCEL);
        }, requestTimeoutMs)
      : null;
  stream.once('close', () => {
    if (timer !== null) clearTimeout(timer);
    // The gateway's own cut is no client reset; a stream answered and then closed with NO_ERROR
    // cost nothing a reset could multiply.
    closed(!cut && (stream.rstCode !== NGHTTP2_NO_ERROR || unanswered));
  });
}
