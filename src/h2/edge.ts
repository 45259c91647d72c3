import http2, { type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import type { Logger } from '../log.js';
import type { ClientRequest, ClientResponse } from '../proxy/client.js';
import { requestTimedOut } from '../request-timeout.js';
import { H2Request, H2Response } from './exchange.js';
import { FlushSweep } from './flush-sweep.js';
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
} from './guards.js';
import { ResetWindow } from './resets.js';

const { NGHTTP2_HTTP_1_1_REQUIRED, NGHTTP2_CANCEL, NGHTTP2_NO_ERROR } = http2.constants;

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
  goaway: GoawayCounter;
  log: Logger;
  /** Time for the reset window (ms): the gateway's clock, which may step back (resets.ts). */
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
  /** Closes the session once idle; counts its open streams. */
  idle: SessionIdle;
}

const ignore = (): void => {};

/**
 * HTTP/2 on Node's core stream API (no compatibility layer: it measured 2.6x the
 * cost per request here): each stream is handed to the proxy as a request like any
 * other (same admission, buckets, capture, errors, forward) through the stand-ins of
 * exchange.ts. Node's own bounds hold the frame-level floods (SETTINGS, PING,
 * session memory, header list size and pairs); this adds the rapid-reset limit.
 */
export function createH2Edge(d: H2EdgeDeps): H2Edge {
  const l = d.limits;
  const TOO_LARGE = headerListTooLarge(l.max_header_list_bytes);
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
      idle: new SessionIdle(session, d.idleTimeoutMs),
    };
    sessions.set(session, st.socket);
    session.on('error', ignore);
    session.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, _f: number, raw: string[]) =>
      onStream(session, st, stream, headers, raw),
    );
    session.on('close', () => sessions.delete(session));
    if (draining) goaway(session, 'drain');
  });
  // A session's own errors (a bad frame, a socket reset) end that session only.
  server.on('sessionError', (e: Error) => d.log.debug('h2 session error', { err: e.message }));

  const onResetPast = (session: ServerHttp2Session) => {
    if (calm(session, d.goaway)) d.log.debug('h2 session reset too many streams: GOAWAY');
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
      answer(stream, 431, TOO_LARGE, d.requestTimeoutMs);
      if (!session.destroyed && tooLarge(session, st.resets, d.now()) && calm(session, d.goaway, 'header_list'))
        d.log.debug('h2 session sent header lists past max_header_list_bytes: GOAWAY');
      return;
    }
    const path = headers[':path'];
    if (path === undefined || headers[':method'] === 'CONNECT' || d.http1Only(path)) {
      stream.close(NGHTTP2_HTTP_1_1_REQUIRED);
      return;
    }
    // Malformed (the method, Host against :authority): 400, no wake (guards.ts). Userinfo in the
    // authority is admission's to refuse (admission/host.ts), with a wake, as over HTTP/1.1.
    const malformed = malformedAnswer(headers);
    if (malformed !== null) {
      answer(stream, 400, malformed, d.requestTimeoutMs);
      return;
    }
    st.idle.opened();
    const res = new H2Response(stream, headers[':method'] === 'HEAD', sweep);
    const req = new H2Request(stream, headers, raw, st.socket, l.max_header_list_bytes, () => res.destroy());
    let timer: NodeJS.Timeout | null = null;
    // The stream's one close listener ('close' comes once): the edge's accounting, then the proxy's (res.closed).
    stream.on('close', () => {
      st.idle.closed();
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
        // The proxy records the wake as timed out (408, request-timeout.ts), as HTTP/1.1's connection
        // check has it do, rather than reading the reset below as the client's going (499) or the
        // origin's request failing with it (502); the stream is reset either way.
        requestTimedOut(stream);
        if (!stream.destroyed) stream.close(NGHTTP2_CANCEL);
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
