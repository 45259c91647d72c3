import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import type { Exchange } from '../capture/recorder.js';
import { type ErrorType, errorBody, GatewayError } from '../errors.js';
import { admit, clientIp } from './admit.js';
import type { ProxyDeps } from './handler.js';
import { forwardRequestHeaders } from './headers.js';

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  429: 'Too Many Requests',
  502: 'Bad Gateway',
  504: 'Gateway Timeout',
};

/**
 * Proxies an HTTP/1.1 Upgrade (WebSocket) through the same admission as any
 * request (admit.ts), then splices the two sockets. The wake is recorded when
 * the tunnel closes, with the origin's handshake status (101 when it upgraded).
 */
export function handleUpgrade(d: ProxyDeps, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  const x = d.recorder.begin();
  const fail = (type: ErrorType, message?: string, extra: string[] = [], e = new GatewayError(type, message)) => {
    const body = JSON.stringify(errorBody(type, x.id, e.message, e.param, e.retryAfter));
    x.status = e.status;
    let more = e.status === 401 ? 'www-authenticate: Bearer\r\n' : '';
    for (let i = 0; i < extra.length; i += 2) more += `${extra[i]}: ${extra[i + 1]}\r\n`;
    socket.end(
      `HTTP/1.1 ${e.status} ${STATUS_TEXT[e.status] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-wake-id: ${x.id}\r\nconnection: close\r\n${more}\r\n${body}`,
    );
    d.recorder.finish(req, x);
  };
  socket.on('error', () => {});
  const a = admit(d, req, x);
  if ('error' in a) return fail(a.error.type, a.error.message, a.headers, a.error);
  const { route, origin, key } = a;
  const cfg = route.cfg;
  const headers = forwardRequestHeaders(req.rawHeaders, {
    dropAuthorization: key !== null,
    clientIp: clientIp(req),
    proto: 'http',
    originHost: origin.host,
    identity: key ? [key.id, key.consumer, key.environment] : null,
    keepUpgrade: true,
  });
  let headText = `${req.method} ${a.path} HTTP/1.1\r\n`;
  for (let i = 0; i < headers.length; i += 2) headText += `${headers[i]}: ${headers[i + 1]}\r\n`;
  headText += '\r\n';
  const upstream =
    origin.protocol === 'https:'
      ? tls.connect({ host: origin.hostname, port: origin.port, servername: origin.hostname })
      : net.connect({ host: origin.hostname, port: origin.port });
  x.tUp = performance.now();
  const timer = setTimeout(() => {
    upstream.destroy();
    if (x.status === 0) fail('upstream_timeout');
  }, cfg.timeout_ms);
  let first = true;
  upstream.on('connect', () => {
    upstream.write(headText);
    if (head.length) upstream.write(head);
  });
  upstream.on('data', (chunk: Buffer) => {
    if (first) {
      first = false;
      clearTimeout(timer);
      const line = chunk.indexOf('\r\n');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(chunk.subarray(0, Math.max(0, line)).toString('latin1'));
      x.status = m ? Number(m[1]) : 502;
      // Add x-wake-id to the handshake answer, after its status line.
      if (line > 0)
        chunk = Buffer.concat([
          chunk.subarray(0, line + 2),
          Buffer.from(`x-wake-id: ${x.id}\r\n`),
          chunk.subarray(line + 2),
        ]);
    }
    x.resBytes += chunk.length;
    if (!socket.write(chunk)) upstream.pause();
  });
  socket.on('drain', () => upstream.resume());
  socket.on('data', (chunk: Buffer) => {
    x.reqBytes += chunk.length;
    if (!upstream.write(chunk)) socket.pause();
  });
  upstream.on('drain', () => socket.resume());
  const close = () => {
    clearTimeout(timer);
    upstream.destroy();
    socket.destroy();
    if (!x.done) d.recorder.finish(req, x as Exchange);
  };
  upstream.on('error', () => {
    if (x.status === 0) {
      clearTimeout(timer);
      fail('upstream_unavailable');
      upstream.destroy();
      return;
    }
    close();
  });
  upstream.on('close', close);
  socket.on('close', close);
}
