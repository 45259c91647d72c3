import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { isRefusal, type Routed } from '../admission/admission.js';
import { clientAddress } from '../admission/client-address.js';
import { NONE, type Refusal } from '../admission/refusal.js';
import { type Origin, type RouteTable, upstreamPath } from '../admission/routes.js';
import type { KeyHolds } from '../auth/key-holds.js';
import { errorBody, GatewayError } from '../errors.js';
import { addressBucket } from '../ratelimit/address.js';
import { noteClientCert } from '../tls/client-cert.js';
import { connectOptions } from '../tls/origin-trust.js';
import { traceparentOf } from '../tracing/context.js';
import type { Downloads } from './downloads.js';
import type { ProxyDeps } from './handler.js';
import { forwardRequestHeaders, forwardResponseHeaders } from './headers.js';
import { relayAnswer } from './relayed-answer.js';
import {
  allowedOffer,
  bodyField,
  declinedMessage,
  h2cSettings,
  hasBody,
  serveDeclined,
  upgradeToken,
  wantsTunnel,
} from './upgrade-offer.js';

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  503: 'Service Unavailable',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  429: 'Too Many Requests',
  502: 'Bad Gateway',
  504: 'Gateway Timeout',
};

/**
 * Open tunnels and upgrade handshakes in progress, so a clean stop can end them, and
 * bounded in all and per client address: each holds two descriptors for as long as it
 * lives, and the write-ahead log and storage need theirs (700 anonymous tunnels under
 * a 1,024 limit once left the log failing with EMFILE).
 */
export class TunnelSet {
  private readonly open = new Set<() => void>();
  /** Connections served as plain HTTP/1.1 past a declined offer (upgrade-offer.ts): not tunnels, not counted. */
  private readonly lent = new Set<() => void>();
  private readonly perClient = new Map<string, number>();

  constructor(
    readonly max = Number.POSITIVE_INFINITY,
    readonly maxPerClient = Number.POSITIVE_INFINITY,
  ) {}

  /** Why one more tunnel from `client` is refused, or null. */
  refusal(client: string): string | null {
    if (this.open.size >= this.max) return `the gateway holds its most tunnels (${this.max}, server.max_tunnels)`;
    if ((this.perClient.get(client) ?? 0) >= this.maxPerClient)
      return `this address holds its most tunnels (${this.maxPerClient}, server.max_tunnels_per_client)`;
    return null;
  }

  add(destroy: () => void, client = ''): () => void {
    this.open.add(destroy);
    this.perClient.set(client, (this.perClient.get(client) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.open.delete(destroy);
      const n = (this.perClient.get(client) ?? 1) - 1;
      if (n <= 0) this.perClient.delete(client);
      else this.perClient.set(client, n);
    };
  }
  /**
   * Holds a connection that is no tunnel but is no longer the HTTP server's either (a
   * declined upgrade offer, served as plain HTTP/1.1): not counted against any bound, and
   * ended by destroyAll with the tunnels. Returns its release.
   */
  lend(destroy: () => void): () => void {
    this.lent.add(destroy);
    return () => void this.lent.delete(destroy);
  }
  get size(): number {
    return this.open.size;
  }
  destroyAll(): void {
    for (const d of [...this.open, ...this.lent]) d();
    this.open.clear();
    this.lent.clear();
    this.perClient.clear();
  }
}

export interface UpgradeDeps extends ProxyDeps {
  tunnels: TunnelSet;
  /** A tunnel opened with a key is held under it, so revoking the key cuts it. */
  holds: KeyHolds;
  /** A tunnel with no traffic either way for this long is closed. */
  idleTimeoutMs: number;
  /**
   * The route table admission matches with: which route an offer is for, before admission
   * (upgrade-offer.ts): the edge's, the one admission holds.
   */
  routes: Pick<RouteTable, 'match'>;
  /**
   * The proxy's answers (ProxyHandler.downloads), so an origin's ordinary answer to an
   * upgrade counts against the same budgets and per-client places as a plain request's.
   */
  answers: Downloads;
}

function connector(o: Origin) {
  // Half-open sockets, so a FIN from one side is passed on, not answered by closing.
  return o.protocol === 'https:'
    ? () =>
        tls.connect({
          host: o.hostname,
          port: o.port,
          servername: o.hostname,
          // The route's CAs and name (routes[].tls), as for its requests.
          ...connectOptions(o.trust),
          allowHalfOpen: true,
        } as tls.ConnectionOptions)
    : () => net.connect({ host: o.hostname, port: o.port, allowHalfOpen: true });
}

const NO_UPGRADE = new GatewayError('invalid_request', 'an upgrade request needs an Upgrade header');
/** RFC 9110 §15.2.2: a 101 names the protocol switched to; Node's parser takes one without it for no switch. */
const SWITCHED_UNNAMED = new GatewayError(
  'upstream_unavailable',
  'the origin answered 101 Switching Protocols without naming the protocol it switched to (Upgrade, and Connection: upgrade)',
);
const UPSTREAM_TIMEOUT = new GatewayError('upstream_timeout');
const REVOKED = new GatewayError('key_revoked');
const RETRY_SHORTLY: readonly string[] = ['retry-after', '1'];

/** Bytes a client may send ahead of the origin's 101 before reading from it stops. */
const MAX_EARLY = 64 * 1024;

/**
 * Proxies an HTTP/1.1 Upgrade (RFC 9110 §7.8) through the same admission as any
 * request (src/admission). The origin's answer is parsed as HTTP: only a 101 whose
 * Upgrade matches the one asked for makes a tunnel. Any other answer is relayed as
 * a normal response (under the bounds of any proxied answer: relayed-answer.ts) and
 * the client connection closed, so bytes the client sent after the handshake can never
 * reach the origin unchecked (request smuggling); a 101 that names no protocol is a 502.
 * The origin's answer head is due within the route's timeout_ms (504 past it). An
 * upgrade request with a body is refused, 400, before the origin is asked: a handshake
 * has none (RFC 6455 §4.1), and tunnel bytes are never searched for gateway keys.
 * Tunnels are counted per client address as admission reads it (behind
 * server.trusted_proxies, the one X-Forwarded-For names).
 * A tunnel passes half-closes both ways, closes after `idleTimeoutMs` without
 * traffic, is cut when the key that opened it is revoked (d.holds), and is recorded
 * as one wake when it ends.
 *
 * An offer the route does not take (no route, or a protocol it does not list: h2c) is
 * declined: a request without a body, and nothing behind it, is served as plain HTTP/1.1
 * instead (upgrade-offer.ts); with a body (or bytes behind it) it is refused, 400, after
 * admission as before.
 */
export function handleUpgrade(d: UpgradeDeps, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  if (
    head.length === 0 &&
    !hasBody(req) &&
    !wantsTunnel((path) => d.routes.match(path), req) &&
    serveDeclined({ lend: (destroy) => d.tunnels.lend(destroy), sendTimeoutMs: d.downloads.sendTimeoutMs }, req, socket)
  ) {
    return;
  }
  const x = d.recorder.begin();
  noteClientCert(req.socket, x);
  d.trace.begin(x, req.headers.traceparent, req.socket, req.headers.tracestate);
  // The connection's address (a trusted proxy's, when one is in front: its chain is appended to).
  const ip = req.socket.remoteAddress ?? '';
  // The client's, as admission reads it: tunnels are counted per client, not per proxy in front.
  const client = clientAddress(ip, req.headers['x-forwarded-for'], d.trusted);
  const full = d.tunnels.refusal(client);
  // What the client sends after the handshake is held (not forwarded) until the
  // origin has agreed to switch; past a small bound, reading stops.
  const early: Buffer[] = [];
  let earlyBytes = 0;
  const hold = (c: Buffer) => {
    early.push(c);
    earlyBytes += c.length;
    if (earlyBytes > MAX_EARLY) socket.pause();
  };
  socket.on('data', hold);
  socket.on('error', () => {});
  let upReq: http.ClientRequest | null = null;
  /** Until the origin is connected (connect_timeout_ms), then until its answer head is whole (timeout_ms). */
  let deadline: NodeJS.Timeout | null = null;
  let ended = false;
  /** Lets go of the hold under the tunnel's key (none before admission, or without a key). */
  let release: (() => void) | null = null;
  const finish = () => {
    if (ended) return;
    ended = true;
    if (deadline !== null) clearTimeout(deadline);
    release?.();
    d.recorder.finish(req, x);
  };
  // Held until the client socket is gone, so a clean stop can end whatever is still open.
  const untrack = full
    ? () => {}
    : d.tunnels.add(() => {
        upReq?.destroy();
        socket.destroy();
        if (x.status === 0) x.status = 499;
        finish();
      }, client);
  socket.once('close', untrack);
  /** Answers with the gateway's own error body and `headers` (a refusal's), and closes. */
  const fail = (e: GatewayError, headers: readonly string[] = NONE) => {
    const body = JSON.stringify(errorBody(e.type, x.id, e.message, e.param, e.retryAfter));
    x.status = e.status;
    x.errorType = e.type;
    let more = '';
    for (let i = 0; i < headers.length; i += 2) more += `${headers[i]}: ${headers[i + 1]}\r\n`;
    if (socket.writable) {
      socket.end(
        `HTTP/1.1 ${e.status} ${STATUS_TEXT[e.status] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-wake-id: ${x.id}\r\ndate: ${new Date().toUTCString()}\r\nconnection: close\r\n${more}\r\n${body}`,
        () => socket.destroy(),
      );
    } else {
      socket.destroy();
    }
    x.resBytes += body.length;
    finish();
  };
  const internal = (message: string) => fail(new GatewayError('internal_error', message));
  const admitted = d.admission.request(req, x);
  if (admitted instanceof Promise) {
    // While the decision waits (on Redis), the socket is read into its buffer, nothing
    // consumed: an upgrade's socket is not read otherwise, and a client that leaves
    // meanwhile would go unseen (its bytes, if it sent any, stay for the tunnel).
    const watch = () => {
      if (socket.readableLength === 0) socket.read(0);
    };
    socket.on('readable', watch);
    admitted
      .then(
        (a) => {
          socket.off('readable', watch);
          tunnel(a);
        },
        (e: Error) => {
          socket.off('readable', watch);
          internal(e.message);
        },
      )
      .catch((e: Error) => {
        // Never an unhandled rejection (it ends the process): the client is answered, or cut.
        if (!ended) internal(e.message);
        else socket.destroy();
      });
    return;
  }
  try {
    tunnel(admitted);
  } catch (e) {
    // Whatever goes wrong answers this client: a throw here would leave the 'upgrade' listener and end the process.
    if (!ended) internal((e as Error).message);
    else socket.destroy();
  }
  function tunnel(a: Routed | Refusal): void {
    // The client went away while the decision waited (on Redis): nothing goes to the origin.
    if (socket.destroyed || socket.readableEnded) {
      socket.destroy();
      if (x.status === 0) x.status = 499;
      return finish();
    }
    if (isRefusal(a)) return fail(a.error, a.headers);
    const token = upgradeToken(req.headers.upgrade);
    if (token === '') return fail(NO_UPGRADE);
    const { route, origin, key } = a;
    // Only the protocols a route lists become tunnels: an h2c tunnel would carry requests no rule ever sees.
    if (!route.upgrades.has(token)) {
      return fail(new GatewayError('invalid_request', declinedMessage(route, token, req, head), 'upgrade'));
    }
    // A handshake has no body (RFC 6455 §4.1): one sent would reach the origin as tunnel
    // bytes after the 101, never searched for gateway keys as a request's body is.
    const bodied = bodyField(req);
    if (bodied !== null) {
      const msg = `an upgrade request carries no body (RFC 6455 §4.1), and this one has ${bodied === 'content-length' ? 'a Content-Length' : 'a Transfer-Encoding'}: the gateway would pass it into the tunnel unchecked; send the body in a request without the Upgrade`;
      return fail(new GatewayError('invalid_request', msg, bodied));
    }
    if (full) return fail(new GatewayError('service_unavailable', full), RETRY_SHORTLY);
    let answered = false;
    // Held under its key from now until it ends: revoking the key refuses a handshake still
    // waiting for the origin (401 key_revoked) and cuts an open tunnel, both sides (its wake
    // is written as any tunnel's end). An answer being relayed is cut too.
    if (key !== null)
      release = d.holds.hold(key, () => {
        if (ended) return;
        if (answered) return void socket.destroy();
        upReq?.destroy();
        fail(REVOKED);
      });
    // Revoked since admission read it (the hold cut it at once): nothing goes to the origin.
    if (ended) return;
    const headers = forwardRequestHeaders(req.rawHeaders, {
      dropAuthorization: key !== null,
      clientIp: ip,
      clientTrusted: d.trusted(ip),
      proto: 'http',
      originHost: origin.host,
      identity: key ? [key.id, key.consumer, key.environment] : null,
      traceparent: traceparentOf(x),
      keepTracestate: x.parentSpanId !== '',
      via: d.via?.of(req.httpVersionMajor, req.httpVersionMinor),
    });
    // Only the upgrade itself is hop-by-hop information the origin needs, and only the
    // protocols the route lists: the origin is never offered one it could switch to unchecked.
    const offer = allowedOffer(route, req.headers.upgrade);
    // An h2c tunnel's origin switches only given the client's HTTP2-Settings, named in Connection (RFC 7540 §3.2.1).
    const settings = token === 'h2c' ? h2cSettings(req.rawHeaders) : null;
    if (settings === null) headers.push('Connection', 'upgrade', 'Upgrade', offer);
    else headers.push('Connection', 'upgrade, HTTP2-Settings', 'Upgrade', offer, 'HTTP2-Settings', settings);
    let outgoing: http.ClientRequest;
    // The path as sent: the tunnel's CLIENT span names it (url.full), as a plain request's does.
    x.upstreamPath = upstreamPath(route, origin, a.ask.path, a.ask.query);
    try {
      outgoing = (origin.protocol === 'https:' ? https : http).request({
        method: req.method,
        path: x.upstreamPath,
        headers,
        // No agent: a connection of its own, made by createConnection (half-open).
        createConnection: connector(origin),
      });
    } catch (e) {
      // Thrown here, it would leave the upgrade handler and end the process (or the edge thread).
      const code = (e as NodeJS.ErrnoException).code ?? 'error';
      return internal(`the upgrade could not be sent to the origin (${code})`);
    }
    upReq = outgoing;
    x.tUp = performance.now();
    // As a plain request's (origin-client.ts): connected within connect_timeout_ms, then the
    // whole answer head within timeout_ms, however it trickles.
    const late = (e: GatewayError) => () => {
      if (answered || ended) return;
      outgoing.destroy();
      fail(e);
    };
    const connectMs = route.cfg.connect_timeout_ms;
    const connectLate = `the origin did not accept a connection within routes[].connect_timeout_ms (${connectMs} ms) of route ${x.route}`;
    deadline = setTimeout(late(new GatewayError('upstream_unavailable', connectLate)), connectMs);
    outgoing.once('socket', (s: net.Socket) => {
      s.once(origin.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
        if (deadline !== null) clearTimeout(deadline);
        if (!answered && !ended) deadline = setTimeout(late(UPSTREAM_TIMEOUT), route.cfg.timeout_ms);
      });
    });
    // A client that ends or closes before the origin answers has gone away.
    socket.once('end', () => clientGone());
    const clientGone = () => {
      if (answered) return;
      // The client left before the origin answered: let go of both sockets now.
      outgoing.destroy();
      socket.destroy();
      if (x.status === 0) x.status = 499;
      finish();
    };
    socket.once('close', clientGone);
    outgoing.on('error', (err: NodeJS.ErrnoException) => {
      if (answered || ended) return;
      d.log.debug('upgrade upstream error', { route: x.route, code: err.code });
      fail(new GatewayError('upstream_unavailable', `the origin could not be reached (${err.code ?? 'error'})`));
    });

    outgoing.on('response', (res: IncomingMessage) => {
      // Not a switch: an ordinary answer, relayed, and this connection ends with it.
      // Whatever the client sent after its request is dropped, never forwarded.
      answered = true;
      if (deadline !== null) clearTimeout(deadline);
      socket.off('close', clientGone);
      socket.off('data', hold);
      early.length = 0;
      if ((res.statusCode ?? 0) < 200) {
        // A 101 without Upgrade (Node passes other 1xx by): no switch, and no answer either.
        res.on('error', () => {});
        res.destroy();
        outgoing.destroy();
        return fail(SWITCHED_UNNAMED);
      }
      socket.resume();
      x.status = res.statusCode ?? 502;
      const h = forwardResponseHeaders(res.rawHeaders, ['x-wake-id', x.id, 'connection', 'close']);
      let text = `HTTP/1.1 ${x.status} ${res.statusMessage ?? ''}\r\n`;
      let dated = false;
      for (let i = 0; i < h.length; i += 2) {
        text += `${h[i]}: ${h[i + 1]}\r\n`;
        if (!dated && (h[i] as string).length === 4 && (h[i] as string).toLowerCase() === 'date') dated = true;
      }
      // An answer relayed without the origin's Date gets the gateway's (RFC 9110 §6.6.1), as any proxied answer does.
      if (!dated) text += `date: ${new Date().toUTCString()}\r\n`;
      // The origin's fields are latin1 strings (one char a byte, as parsed): written back byte for byte.
      socket.write(`${text}\r\n`, 'latin1');
      // The origin broke off mid-answer: recorded as such (a plain request's answer is too).
      let broke = false;
      res.once('error', () => {
        broke = !res.complete;
      });
      res.once('end', () => outgoing.destroy());
      // Recorded once the client has it all (or is gone, or cut off: 499, as a plain request's answer).
      socket.once('close', () => {
        if (broke) x.status = 502;
        else if (!socket.writableFinished) x.status = 499;
        outgoing.destroy();
        finish();
      });
      // A request with a body never gets here, so the socket is the connection itself (upgrade-offer.ts).
      relayAnswer(res, socket as net.Socket, {
        answers: d.answers,
        client: addressBucket(client),
        count: (n) => {
          x.resBytes += n;
        },
      });
    });

    outgoing.on('upgrade', (res: IncomingMessage, up: net.Socket, upHead: Buffer) => {
      answered = true;
      if (deadline !== null) clearTimeout(deadline);
      socket.off('close', clientGone);
      up.on('error', () => {});
      if (upgradeToken(res.headers.upgrade) !== token) {
        up.destroy();
        const msg = `the origin switched to ${JSON.stringify(res.headers.upgrade ?? '')}`;
        return fail(new GatewayError('upstream_unavailable', msg));
      }
      x.status = 101;
      let text = `HTTP/1.1 101 ${res.statusMessage || 'Switching Protocols'}\r\n`;
      const raw = res.rawHeaders;
      for (let i = 0; i < raw.length; i += 2) {
        if ((raw[i] as string).toLowerCase() !== 'x-wake-id') text += `${raw[i]}: ${raw[i + 1]}\r\n`;
      }
      text += `x-wake-id: ${x.id}\r\n\r\n`;
      socket.write(text, 'latin1');
      socket.off('data', hold);
      early.unshift(head);
      splice(d, socket, up, upHead, Buffer.concat(early), x, finish);
    });
    outgoing.end();
  }
}

/** Joins the two sockets: bytes both ways, half-closes both ways, an idle timeout, one wake at the end. */
function splice(
  d: UpgradeDeps,
  client: Duplex,
  up: net.Socket,
  upHead: Buffer,
  clientHead: Buffer,
  x: { reqBytes: number; resBytes: number },
  finish: () => void,
): void {
  // One timer, refreshed by traffic either way, rather than a timer per socket.
  const idle = setTimeout(() => close(), d.idleTimeoutMs);
  const close = () => {
    clearTimeout(idle);
    client.destroy();
    up.destroy();
    finish();
  };
  if (upHead.length) {
    x.resBytes += upHead.length;
    client.write(upHead);
  }
  if (clientHead.length) {
    x.reqBytes += clientHead.length;
    up.write(clientHead);
  }
  client.on('data', (c: Buffer) => {
    x.reqBytes += c.length;
    idle.refresh();
  });
  up.on('data', (c: Buffer) => {
    x.resBytes += c.length;
    idle.refresh();
  });
  // pipe() ends the other side when one side ends: a half-close passes through.
  client.pipe(up);
  up.pipe(client);
  client.once('close', close);
  up.once('close', close);
  client.resume();
}
