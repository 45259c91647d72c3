import http, { type IncomingMessage } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Route } from '../admission/routes.js';
import { carriesGatewayKey } from './headers.js';

/**
 * An HTTP/1.1 Upgrade offer (RFC 9110 §7.8) the route does not take. A server may
 * ignore an Upgrade it does not want and answer over HTTP/1.1, as nginx does; `curl
 * --http2` on an http:// URL offers `Upgrade: h2c` on every request. Such a request,
 * when it has no body, is served as the ordinary request it also is: the same
 * listener, admission, capture and answer as any other, with the offer (Upgrade,
 * HTTP2-Settings, and the Connection tokens naming them) never sent to the origin (an
 * origin asked through the gateway to switch to h2c would take requests no rule sees).
 *
 * Node 20 decides "upgrade" by listener count, not per request: by the time 'upgrade'
 * fires, the socket is detached from the HTTP parser. The answer is therefore written
 * by a ServerResponse of our own on that socket, and the connection closes after it
 * (nothing is parsed on it again). Node 24.9+ can decide per request before the parser
 * lets go (http.createServer's shouldUpgradeCallback, `wantsTunnel` below fits it), which
 * would keep the connection and take bodies too; this path stays for Node 20.
 */

/** Upgrade's protocols, as sent (trimmed, empty ones dropped). */
export const offered = (v: string | undefined): string[] => {
  const out: string[] = [];
  for (const t of (v ?? '').split(',')) {
    const p = t.trim();
    if (p !== '') out.push(p);
  }
  return out;
};

/** The protocol a tunnel is for: the first offered, lower-cased ("websocket" of "WebSocket"). */
export const upgradeToken = (v: string | undefined): string => offered(v)[0]?.toLowerCase() ?? '';

/** The offer as passed to the origin of a tunnel: only the protocols `route` lists (a proxy sets its own hop's Upgrade). */
export const allowedOffer = (route: Route, v: string | undefined): string =>
  offered(v)
    .filter((p) => route.upgrades.has(p.toLowerCase()))
    .join(', ');

/** A request that has a body (RFC 9112 §6.3): Transfer-Encoding, or a Content-Length other than 0. */
export const hasBody = (req: IncomingMessage): boolean => bodyField(req) !== null;

/** The field that gives a request a body (RFC 9112 §6.3): `transfer-encoding`, `content-length` (other than 0), or null. */
export const bodyField = (req: IncomingMessage): 'transfer-encoding' | 'content-length' | null => {
  if (req.headers['transfer-encoding'] !== undefined) return 'transfer-encoding';
  const n = req.headers['content-length'];
  return n !== undefined && Number(n) !== 0 ? 'content-length' : null;
};

/** A token68 in base64url without padding: what HTTP2-Settings holds (RFC 7540 §3.2.1). */
const BASE64URL = /^[A-Za-z0-9_-]*$/;

/**
 * The HTTP2-Settings value an h2c tunnel's origin is given (RFC 7540 §3.2.1: a server
 * switches only on exactly one), or null to send none: none or more than one sent, a
 * value that is no base64url, or one that holds a gateway key (never sent on in any
 * field). Only for a tunnel to h2c: anywhere else the field is dropped as hop-by-hop.
 */
export function h2cSettings(raw: readonly string[]): string | null {
  let value: string | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    if ((raw[i] as string).toLowerCase() !== 'http2-settings') continue;
    if (value !== null) return null;
    value = (raw[i + 1] as string).trim();
  }
  if (value === null || !BASE64URL.test(value) || carriesGatewayKey(value)) return null;
  return value;
}

/**
 * Whether an Upgrade request is one for a tunnel: its route (as admission will match
 * it, `match`) lists the protocol offered first. Anything else (no route, another
 * protocol) is a request like any other, whose offer is declined.
 */
export function wantsTunnel(match: (path: string) => Route | null, req: IncomingMessage): boolean {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const route = match(q === -1 ? url : url.slice(0, q));
  return route?.upgrades.has(upgradeToken(req.headers.upgrade)) === true;
}

/** Why a declined offer is refused rather than served (a body, or bytes behind it), for the 400's message. */
export function declinedMessage(route: Route, token: string, req: IncomingMessage, head: Buffer): string {
  const allowed = [...route.upgrades].join(', ') || 'none';
  const base = `route ${route.name} does not allow upgrades to ${JSON.stringify(token)} (routes[].upgrades: ${allowed})`;
  const how = `send it without "Upgrade: ${token}"${token === 'h2c' ? ' (curl: --http1.1 in place of --http2)' : ''}`;
  if (hasBody(req)) return `${base}, and a request with a body that offers one is not served in its place: ${how}`;
  if (head.length > 0) {
    return `${base}, and bytes sent behind the request before any answer (as if it had switched) are not served: ${how}`;
  }
  return base;
}

/** Bytes a client may send behind its served request (read, never used) before reading stops. */
const MAX_DISCARD = 64 * 1024;

/** Node's own test for an Expect that asks for 100 Continue. */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

/** What serveDeclined needs of the edge. */
export interface DeclineDeps {
  /** Holds the connection until it ends, so a clean stop's forced end closes it too (TunnelSet.lend). */
  lend: (destroy: () => void) => () => void;
  /** server.send_timeout_ms: how long the answer may wait on a client that reads nothing. */
  sendTimeoutMs: number;
}

/**
 * Serves a bodyless request whose Upgrade offer is declined, on `socket` (the one the
 * 'upgrade' event handed over), through the HTTP server's own 'request' listener (the
 * edge's: /v2, then the proxy), exactly as it would be without the offer, and closes the
 * connection after the answer. False when there is no HTTP server to hand it to.
 *
 * Timeouts: the request is whole when 'upgrade' fires, so the headers and request timeouts
 * are spent; there is no keep-alive. What is left is the answer, bounded by the proxy's
 * own timeouts (the origin's, the queue's) and by send_timeout_ms for a client that reads
 * nothing (the proxy arms it when the client falls behind; here also once the answer is
 * all written, so its last bytes cannot hold the connection).
 */
export function serveDeclined(d: DeclineDeps, req: IncomingMessage, socket: Duplex): boolean {
  // Newer Node (26) hands over a request whose body is still arriving wrapped; a bodyless one, the socket itself.
  if (!(socket instanceof net.Socket)) return false;
  const server = (socket as net.Socket & { server?: unknown }).server;
  if (!(server instanceof http.Server) || server.listenerCount('request') === 0) return false;
  socket.on('error', () => {});
  // Held from now until it closes (Node forgot it at 'upgrade'): a clean stop's forced end closes it too.
  const untrack = d.lend(() => socket.destroy());
  socket.once('close', untrack);
  // Answers of earlier requests on this connection (pipelined) are still being written:
  // this one is answered after all of them, as Node would, one at a time.
  const turn = (): void => {
    if (socket.destroyed) return;
    const busy = (socket as OnSocket)._httpMessage;
    if (busy) return void busy.once('finish', () => process.nextTick(turn));
    try {
      serve(server, req, socket, d);
    } catch {
      // Thrown here it would leave the 'upgrade' listener (or a tick) and end the process: the client is cut instead.
      socket.destroy();
    }
  };
  turn();
  return true;
}

/** The answer Node's server has on a socket, if any (it clears it once that answer is done). */
type OnSocket = net.Socket & { _httpMessage?: http.ServerResponse | null };

function serve(server: http.Server, req: IncomingMessage, socket: net.Socket, d: DeclineDeps): void {
  // Gone, or ended by the answer before (one that closed the connection): nothing to answer on.
  if (socket.destroyed || !socket.writable) return void socket.destroy();
  // A keep-alive timer the answer before left on the socket is no longer Node's to act on.
  socket.setTimeout(0);
  // The offer is declined: Upgrade, HTTP2-Settings and the Connection tokens are hop-by-hop
  // (proxy/headers.ts), never sent on. The request itself is left as Node made it (Node 26
  // reads its raw headers by its own count).
  const res = new http.ServerResponse(req);
  // Connection: close on the answer; nothing more is read as a request on this connection.
  res.shouldKeepAlive = false;
  res.assignSocket(socket);
  // What Node's server does once it has written an answer that closes the connection.
  res.once('finish', () => socket.end(() => socket.destroy()));
  // Once all of it is written, its last bytes wait send_timeout_ms at most for the client.
  res.once('prefinish', () => socket.setTimeout(d.sendTimeoutMs));
  // As Node's server does on an idle socket: the answer's 'timeout' (the proxy's send timeout), else the end.
  socket.on('timeout', () => {
    if (!res.emit('timeout', socket)) socket.destroy();
  });
  // Node passes a socket's 'drain' on to the answer on it; it took that listener away at 'upgrade'.
  socket.on('drain', () => {
    if ((socket as OnSocket)._httpMessage === res && !res.writableFinished) res.emit('drain');
  });
  // Read on, so a client that leaves is seen (the proxy then lets go of the origin, the
  // wake says 499). What it sends is a next request this connection will not serve:
  // dropped, never forwarded; past a small bound, reading stops.
  let dropped = 0;
  socket.on('data', (c: Buffer) => {
    dropped += c.length;
    if (dropped > MAX_DISCARD) socket.pause();
  });
  socket.on('end', () => socket.destroy());
  socket.resume();
  // Expect, as Node's server answers it, and only on HTTP/1.1 (RFC 9110 §10.1.1: a 1.0
  // request's is ignored): 100-continue asked of the 'checkContinue' listener, anything else 417.
  const expect = req.httpVersionMajor === 1 && req.httpVersionMinor === 1 ? req.headers.expect : undefined;
  if (expect === undefined) server.emit('request', req, res);
  else if (!CONTINUE.test(expect)) {
    res.writeHead(417);
    res.end();
  } else if (server.listenerCount('checkContinue') > 0) server.emit('checkContinue', req, res);
  else {
    res.writeContinue();
    server.emit('request', req, res);
  }
}
