import http from 'node:http';
import type net from 'node:net';
import type { Config } from './config/index.js';
import { type ErrorType, errorBody } from './errors.js';
import { serveDeclined } from './proxy/upgrade-offer.js';
import { requestTimedOut } from './request-timeout.js';

/**
 * A node:http server with the gateway's limits, for every listener alike (the main
 * listener's edges, the ops listener, a separate management listener): the head's size
 * and time, the whole request's time and keep-alive, checked often enough to bite;
 * the gateway's own JSON answer to what Node cannot parse; and an answer to CONNECT.
 */
export function gatewayServer(s: Config['server'], handler?: http.RequestListener): http.Server {
  const server = http.createServer(
    {
      maxHeaderSize: s.max_header_bytes,
      headersTimeout: s.headers_timeout_ms,
      requestTimeout: s.request_timeout_ms,
      keepAliveTimeout: s.keep_alive_timeout_ms,
      // Node only enforces headersTimeout/requestTimeout when it checks connections
      // (every 30 s by default); check often enough for the configured timeouts to bite.
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(s.headers_timeout_ms / 4))),
      // The gateway answers 431 / 400 itself for malformed requests (answerMalformed). An
      // HTTP/1.1 request without Host (or with an invalid one) is refused by admission
      // (admission/host.ts), with the JSON error body and its wake: Node's own check
      // would answer a bare 400, unrecorded.
      requireHostHeader: false,
    },
    handler,
  );
  // At most this many connections at once (the edge's main listener; the ops and management listeners alike).
  server.maxConnections = s.max_connections;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) =>
    answerMalformed(err, socket, s.max_header_bytes),
  );
  answerConnect(server, s.send_timeout_ms);
  return server;
}

/**
 * CONNECT (RFC 9110 §9.3.6) asks a forward proxy for a tunnel; the gateway is none. Node
 * hands every CONNECT to 'connect' (with no listener it drops the connection unanswered):
 * one to a host:port (or any target that is no path) is served by the listener's own
 * 'request' listener like any request whose target is no path, which refuses it as it
 * refuses `GET http://host/` (the main listener: 400 `invalid_request`, `param: "path"`,
 * with its wake and x-wake-id); a CONNECT to a path is no valid request (RFC 9112 §3.2.3):
 * 400 `malformed request`, as Node's parser would have said. The connection then closes.
 * Sockets handed over here are no longer the HTTP server's: its closeAllConnections (a
 * stop's forced end) ends them too.
 */
function answerConnect(server: http.Server, sendTimeoutMs: number): void {
  const lent = new Set<() => void>();
  const lend = (destroy: () => void) => {
    lent.add(destroy);
    return () => void lent.delete(destroy);
  };
  const closeAll = server.closeAllConnections;
  server.closeAllConnections = function (this: http.Server) {
    closeAll.call(this);
    for (const destroy of [...lent]) destroy();
    lent.clear();
  };
  server.on('connect', (req: http.IncomingMessage, socket: net.Socket) => {
    if ((req.url ?? '').charCodeAt(0) !== 47 && serveDeclined({ lend, sendTimeoutMs }, req, socket)) return;
    socket.on('error', () => {});
    refuse(socket, 400, 'invalid_request', 'malformed request');
  });
}

/** The answer Node's server has in flight on a socket, and its parser's current request (Node's own fields). */
type OnSocket = net.Socket & {
  _httpMessage?: http.ServerResponse | null;
  parser?: { incoming?: http.IncomingMessage | null } | null;
};

/**
 * A request Node could not parse, or not in time: answered with the gateway's own error
 * body (431, 408 or 400), then the socket is let go even if the client never reads or
 * closes. `maxHeaderBytes` (server.max_header_bytes) is named in the 431's message.
 *
 * server.request_timeout_ms on a request whose body is still arriving (the request
 * exists): whoever reads the body answers it (request-timeout.ts: the 408 with its wake
 * id). Never a second answer: once an answer has begun on the connection (an origin that
 * answers as it reads), or the request was already answered whole, or another request's
 * answer is still to come before it, the connection is cut.
 */
export function answerMalformed(err: NodeJS.ErrnoException, socket: net.Socket, maxHeaderBytes: number): void {
  // A TLS error (a renegotiation refused, tls/front.ts) leaves no channel to answer on: cut.
  if (!socket.writable || err.code?.startsWith('ERR_TLS_')) return void socket.destroy();
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    const res = (socket as OnSocket)._httpMessage;
    const incoming = (socket as OnSocket).parser?.incoming;
    if (res) {
      const begun = res.headersSent;
      // Not the timed-out request's answer (one before it, pipelined): a 408 would be read as that one's.
      const own = res.req?.complete === false;
      if (own) {
        // The answer's owner ends the exchange and records its wake.
        try {
          requestTimedOut(res);
        } catch {
          // Its owner failed: the connection is cut, or answered without a wake id, below.
        }
      }
      if (begun || !own) return void socket.destroy();
      // Answered by its owner (the 408 with its wake id): the connection closes after it.
      if (res.headersSent) return;
    } else if (incoming?.complete === false) {
      // The request whose body is still arriving was answered whole already: nothing more is said on it.
      return void socket.destroy();
    }
  }
  const code = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  refuse(
    socket,
    code,
    code === 431 ? 'request_header_fields_too_large' : 'invalid_request',
    code === 431
      ? `the request's header section is larger than server.max_header_bytes (${maxHeaderBytes} bytes)`
      : code === 408
        ? 'request timed out'
        : 'malformed request',
  );
}

/** The gateway's error answer written on a socket with no request (no wake: `wake_id` null); the connection closes. */
function refuse(socket: net.Socket, code: 400 | 408 | 431, type: ErrorType, message: string): void {
  const body = JSON.stringify(errorBody(type, null, message));
  const text = code === 431 ? 'Request Header Fields Too Large' : code === 408 ? 'Request Timeout' : 'Bad Request';
  socket.end(
    `HTTP/1.1 ${code} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}
