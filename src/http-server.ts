import http from 'node:http';
import type net from 'node:net';
import type { Config } from './config/index.js';

/**
 * A node:http server with the gateway's limits, for every listener alike (the main
 * listener's edges, the ops listener, a separate management listener): the head's size
 * and time, the whole request's time and keep-alive, checked often enough to bite;
 * and the gateway's own JSON answer to what Node cannot parse.
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
      // The gateway answers 431 / 400 itself for malformed requests (answerMalformed).
      requireHostHeader: false,
    },
    handler,
  );
  // At most this many connections at once (the edge's main listener; the ops and management listeners alike).
  server.maxConnections = s.max_connections;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) =>
    answerMalformed(err, socket, s.max_header_bytes),
  );
  return server;
}

/**
 * A request Node could not parse: answered with the gateway's own error body (431,
 * 408 or 400), then the socket is let go even if the client never reads or closes.
 * `maxHeaderBytes` (server.max_header_bytes) is named in the 431's message.
 */
export function answerMalformed(err: NodeJS.ErrnoException, socket: net.Socket, maxHeaderBytes: number): void {
  // A TLS error (a renegotiation refused, tls/front.ts) leaves no channel to answer on: cut.
  if (!socket.writable || err.code?.startsWith('ERR_TLS_')) return void socket.destroy();
  const code = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const type = code === 431 ? 'request_header_fields_too_large' : 'invalid_request';
  const body = JSON.stringify({
    error: {
      type,
      message:
        code === 431
          ? `the request's header section is larger than server.max_header_bytes (${maxHeaderBytes} bytes)`
          : code === 408
            ? 'request timed out'
            : 'malformed request',
      param: null,
      retry_after: null,
      wake_id: null,
    },
  });
  const text = code === 431 ? 'Request Header Fields Too Large' : code === 408 ? 'Request Timeout' : 'Bad Request';
  socket.end(
    `HTTP/1.1 ${code} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}
