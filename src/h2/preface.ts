import type http from 'node:http';
import type { Socket } from 'node:net';

/** The client connection preface of HTTP/2 with prior knowledge (RFC 9113 §3.4). */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const EMPTY: Buffer = Buffer.alloc(0);

/**
 * h2c with prior knowledge on the plain listener: each new connection's first bytes
 * choose HTTP/2 (the 24-byte preface) or HTTP/1.1 (anything else, decided at the
 * first byte that differs), and are put back before the connection is handed on. The
 * HTTP server keeps listening (its connection limit, timeouts and drain hold); only
 * its connection handler is put behind this look. Used only with `http2: h2c`, so
 * the default plain path pays nothing. A connection that sends too little to decide
 * within `timeoutMs` (server.headers_timeout_ms) is closed.
 */
export function choosePerConnection(server: http.Server, h2: (socket: Socket) => void, timeoutMs: number): void {
  const h1 = server.listeners('connection')[0] as ((socket: Socket) => void) | undefined;
  if (h1 === undefined) throw new Error('the HTTP server has no connection handler to put behind the h2c look');
  server.removeListener('connection', h1);
  // Node's handler reads the server as `this`.
  const toH1 = (socket: Socket) => h1.call(server, socket);
  server.on('connection', (socket: Socket) => {
    let got: Buffer = EMPTY;
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    const to = (serve: (socket: Socket) => void, resume: boolean) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onError);
      socket.pause();
      socket.unshift(got);
      serve(socket);
      // The HTTP server reads on from the stream (what was put back first); the HTTP/2
      // session reads what was put back itself, on the next tick, before its handle: a
      // resume here would hand those bytes to no one.
      if (resume) socket.resume();
      // The HTTP server's sockets allow half-open connections (HTTP/1.1 answers after the
      // client's FIN); an HTTP/2 session must not: it would never learn that its client
      // went (nothing closes the socket while no frame is written), its streams holding
      // their origin slots and budgets. Ended as Node's own HTTP/2 server ends them.
      else socket.once('end', () => socket.end());
    };
    const onData = (c: Buffer) => {
      got = got.length === 0 ? c : Buffer.concat([got, c]);
      const n = Math.min(got.length, PREFACE.length);
      if (got.compare(PREFACE, 0, n, 0, n) !== 0) to(toH1, true);
      else if (n === PREFACE.length) to(h2, false);
    };
    const onError = () => {
      clearTimeout(timer);
      socket.destroy();
    };
    socket.on('data', onData);
    socket.on('error', onError);
    socket.once('close', () => clearTimeout(timer));
  });
}
