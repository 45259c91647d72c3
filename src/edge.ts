import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { Admission } from './admission/admission.js';
import { hostProblem } from './admission/host.js';
import { RouteTable } from './admission/routes.js';
import { toOriginForm } from './admission/target.js';
import type { ViaValues } from './admission/via.js';
import type { KeyHolds } from './auth/key-holds.js';
import type { KeyRing } from './auth/keyring.js';
import type { Capture } from './capture/pipeline.js';
import { holdsGatewayKey } from './capture/text.js';
import type { Clock } from './clock.js';
import type { Config } from './config/index.js';
import { createH2Edge, type H2Edge } from './h2/edge.js';
import { choosePerConnection } from './h2/preface.js';
import { gatewayServer } from './http-server.js';
import type { Logger } from './log.js';
import { apiBodyLimits, type BodyRefusalKind, readWhole } from './management-body.js';
import type { Metrics } from './metrics/index.js';
import { tunnelBound } from './proxy/descriptors.js';
import { ProxyHandler } from './proxy/handler.js';
import { trustedProxies } from './proxy/trust.js';
import { handleUpgrade, TunnelSet } from './proxy/websocket.js';
import type { RequestLimiter } from './ratelimit/types.js';
import { listenError } from './startup.js';
import { type EdgeTls, mainTls } from './tls/edge-tls.js';
import type { TlsMaterial } from './tls/material.js';
import { traceStart } from './tracing/context.js';

/** A /v2 call whose body was not invited (Expect refused), as handed on. */
const NO_BODY = Buffer.alloc(0);

/** During a stop, idle connections are closed once no request has been in flight for this long. */
const DRAIN_QUIET_MS = 250;

const MANAGEMENT = ['/v2/wakes', '/v2/api-keys', '/v2/webhooks', '/v2/stats', '/v2/environments', '/v2/openapi.json'];

/** True for the paths the /v2 management API owns; everything else is proxied. */
export function isManagementPath(url: string): boolean {
  if (url.charCodeAt(1) !== 118 || !url.startsWith('/v2/')) return false;
  for (const p of MANAGEMENT) {
    if (url.startsWith(p)) {
      const c = url.charCodeAt(p.length);
      if (Number.isNaN(c) || c === 47 || c === 63) return true;
    }
  }
  return false;
}

/**
 * One warning line for each route no request can reach while management.on_main: its
 * prefix lies under a path the /v2 API owns (`/v2/webhooks/stripe`), which the gateway
 * answers itself on the main listener.
 */
export function routesUnderManagement(cfg: Pick<Config, 'routes' | 'management'>): string[] {
  if (!cfg.management.on_main) return [];
  return cfg.routes
    .filter((r) => isManagementPath(r.prefix))
    .map(
      (r) =>
        `route ${r.name} (prefix ${r.prefix}) is under a path the gateway's /v2 API answers itself: none of its requests reaches its origin; choose another prefix, or set management.on_main: false to serve /v2 on the ops listener only`,
    );
}

/**
 * The config one of `threads` edge threads runs with: the process-wide bounds
 * (connections, tunnels, buffered bodies, connections to each origin) shared out,
 * so the process keeps to them whatever the thread count, and so are capture's
 * (captureShare). Per-client bounds stay per thread.
 */
export function shareOf(cfg: Readonly<Config>, threads: number): Readonly<Config> {
  if (threads <= 1) return cfg;
  const share = (n: number) => Math.max(1, Math.ceil(n / threads));
  const s = cfg.server;
  return {
    ...captureShare(cfg, threads),
    server: {
      ...s,
      max_connections: share(s.max_connections),
      max_tunnels: share(s.max_tunnels),
      max_buffered_request_bytes: share(s.max_buffered_request_bytes),
      max_buffered_response_bytes: share(s.max_buffered_response_bytes),
      upstream_connections: share(s.upstream_connections),
    },
  };
}

/**
 * Capture's process-wide bounds as one of `threads` edge threads keeps them: each
 * thread has its own log and pipeline, so the log's disk (`spool_max_bytes`), the rows
 * and detail bytes held in memory are shared out among the edges and the control
 * thread's own pipeline (the /v2 calls' wakes: `controlShare`), and every route's
 * detail rate (`max_per_second`, `max_bytes_per_second`; 0, no limit, stays 0)
 * among the edges, which serve the routes.
 */
export function captureShare(cfg: Readonly<Config>, threads: number, controlShare = false): Readonly<Config> {
  if (threads <= 1) return cfg;
  // The pipelines: one per edge thread, and the control thread's.
  const budget = (n: number) => Math.max(1, Math.ceil(n / (threads + 1)));
  const rate = (n: number) => (n === 0 ? 0 : Math.max(1, Math.ceil(n / threads)));
  /** A detail block (the config's, or a route's narrowing of it) with its rates shared out. */
  const rates = <D extends { max_per_second?: number; max_bytes_per_second?: number }>(d: D): D => ({
    ...d,
    ...(d.max_per_second === undefined ? {} : { max_per_second: rate(d.max_per_second) }),
    ...(d.max_bytes_per_second === undefined ? {} : { max_bytes_per_second: rate(d.max_bytes_per_second) }),
  });
  const c = cfg.capture;
  return {
    ...cfg,
    storage: { ...cfg.storage, spool_max_bytes: budget(cfg.storage.spool_max_bytes) },
    capture: {
      ...c,
      max_buffered_rows: budget(c.max_buffered_rows),
      detail_max_buffered_bytes: budget(c.detail_max_buffered_bytes),
      detail: controlShare ? c.detail : rates(c.detail),
    },
    routes: controlShare
      ? cfg.routes
      : cfg.routes.map((r) => ({ ...r, capture: { ...r.capture, detail: rates(r.capture.detail) } })),
  };
}

/** What an edge is given: the request path's shared parts, and where /v2 calls go. */
export interface EdgeDeps {
  cfg: Readonly<Config>;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  ring: KeyRing;
  /** What keys hold open (tunnels), told by `ring` of every key version it applies: a revoked key's tunnels are cut. */
  holds: KeyHolds;
  limiter: RequestLimiter;
  capture: Capture;
  /**
   * Answers a /v2 call that reached the main listener (the control thread, here or across
   * threads), its body read whole; or, when the edge refused the body (`refused`), without it.
   */
  manage: (req: IncomingMessage, res: ServerResponse, body: Buffer | null, refused?: BodyRefusalKind) => void;
  /** Listen with SO_REUSEPORT, beside the other edge threads. */
  reusePort: boolean;
  /** Tests only: every answer says which edge thread served it (x-wakegate-thread). */
  threadLabel: string | null;
  /** TLS on the main listener (server.tls): its certificates and session-ticket keys; absent or null: plain HTTP. */
  tls?: EdgeTls | null;
  /** The gateway's `Via` values: added to each forwarded request, and a request naming them is a loop (admission/via.ts). */
  via: ViaValues;
}

/**
 * One edge: the main listener and the whole request path behind it (routes, key
 * check, buckets, forwarding, upgrades and tunnels, capture). An edge thread runs
 * one; with `threads: 1` the control thread runs it too.
 */
export interface Edge {
  readonly name: 'edge';
  readonly server: http.Server;
  /** The listening socket: `server` itself, or the TLS listener in front of it. */
  readonly listener: net.Server;
  readonly proxy: ProxyHandler;
  readonly tunnels: TunnelSet;
  readonly routes: RouteTable;
  /** HTTP/2 (server.http2): hand it a connection that chose h2 (ALPN on TLS); null when off. */
  readonly h2: H2Edge | null;
  listen(port: number): Promise<number>;
  /** Stops accepting, serves what comes on open connections with Connection: close, then closes them. */
  drain(graceMs: number): Promise<void>;
  /** New certificates for the TLS listener (a reload); open connections keep theirs. */
  setTls(m: TlsMaterial): void;
  close(): Promise<void>;
}

export function createEdge(d: EdgeDeps): Edge {
  const { cfg } = d;
  const s = cfg.server;
  const server = gatewayServer(s);
  const tunnels = new TunnelSet(tunnelBound(s.max_tunnels), s.max_tunnels_per_client);
  const routes = new RouteTable(cfg.routes, cfg.environments, cfg.capture);
  const trusted = trustedProxies(s.trusted_proxies);
  const proxyDeps = {
    admission: new Admission({
      routes,
      ring: d.ring,
      limiter: d.limiter,
      metrics: d.metrics,
      clock: d.clock,
      trusted,
      via: d.via,
    }),
    recorder: d.capture.recorder,
    metrics: d.metrics,
    log: d.log,
    trusted,
    server: {
      bufferBytes: s.buffer_request_body_bytes,
      bufferTotal: s.max_buffered_request_bytes,
      streamsPerClient: s.max_streaming_uploads_per_client,
      connections: s.upstream_connections,
    },
    downloads: {
      bufferBytes: s.buffer_response_body_bytes,
      totalBytes: s.max_buffered_response_bytes,
      perClient: s.max_streaming_downloads_per_client,
      sendTimeoutMs: s.send_timeout_ms,
    },
    trace: traceStart(cfg, trusted),
    via: d.via,
  };
  const proxy = new ProxyHandler(proxyDeps);
  const onMain = cfg.management.on_main;
  // A /v2 body is read whole here before it is handed on: slow clients hold no handover.
  const apiBody = apiBodyLimits(s);
  /**
   * A /v2 call: its body read whole, then handed on. A body past the limits is not read
   * on: the call is handed on without it, saying why, and the API answers it (413, 408)
   * only once the call has passed admission, as on the management listener (a refused
   * key is 401 or 429 whatever its body; an admitted call is charged). The rest of the
   * body is never read: the connection closes after the answer.
   */
  const v2 = (req: IncomingMessage, res: ServerResponse, invite?: () => void) =>
    readWhole(req, res, apiBody, (body) => d.manage(req, res, body), {
      refused: (why) => {
        res.shouldKeepAlive = false;
        res.once('finish', () => req.socket.destroy());
        d.manage(req, res, null, why);
      },
      ...(invite ? { invite } : {}),
    });
  const label = d.threadLabel;
  let draining = false;
  // The main listener proxies; /v2 is answered there too unless management.on_main is
  // false. A gateway key in a /v2 URL, or a missing or bad Host, is refused like any other
  // (admission's first checks) here: a call handed over would carry a Host of the hand-over's.
  const refusedHere = (req: IncomingMessage, url: string): boolean =>
    !onMain || !isManagementPath(url) || holdsGatewayKey(url) || hostProblem(req) !== null;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    // Draining: served, then the connection closes (the client knows not to reuse it).
    if (draining) res.shouldKeepAlive = false;
    if (label !== null) res.setHeader('x-wakegate-thread', label);
    toOriginForm(req);
    const url = req.url ?? '/';
    if (refusedHere(req, url)) return proxy.handle(req, res);
    v2(req, res);
  });
  // Expect: 100-continue (RFC 9110 §10.1.1): the body is invited only once the
  // request would be accepted, so a refused key never gets a 100 Continue.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    toOriginForm(req);
    const url = req.url ?? '/';
    if (label !== null) res.setHeader('x-wakegate-thread', label);
    if (refusedHere(req, url)) return proxy.handle(req, res, true);
    // /v2: continue only for a key that is known and live (and a body within the limit); the API answers the rest.
    if (proxyDeps.admission.identifies(req.headers.authorization)) return v2(req, res, () => res.writeContinue());
    // The body was never invited: the API refuses the key without it, and the connection closes.
    res.shouldKeepAlive = false;
    d.manage(req, res, NO_BODY);
  });
  // An upgrade's ordinary answer shares the proxy's answers' budgets and places.
  const upgradeDeps = {
    ...proxyDeps,
    routes,
    tunnels,
    holds: d.holds,
    idleTimeoutMs: s.tunnel_idle_timeout_ms,
    answers: proxy.downloads,
  };
  server.on('upgrade', (req, socket, head) => {
    toOriginForm(req);
    handleUpgrade(upgradeDeps, req, socket, head);
  });
  const h2 = s.http2 === false ? null : h2Edge(d, proxy);
  const front = mainTls({
    http: server,
    cfg,
    clock: d.clock,
    tls: d.tls ?? null,
    // ALPN offers h2 beside http/1.1 unless server.http2 is false.
    acceptH2: h2?.accept ?? null,
    metrics: d.metrics,
  });
  const listener: net.Server = front?.server ?? server;
  // h2c: prior-knowledge HTTP/2 on the plain listener, chosen per connection by its first bytes.
  if (h2 !== null && s.http2 === 'h2c' && front === null) choosePerConnection(server, h2.accept, s.headers_timeout_ms);

  return {
    name: 'edge',
    server,
    listener,
    proxy,
    tunnels,
    routes,
    h2,
    listen: (port) =>
      new Promise<number>((resolve, reject) => {
        listener.once('error', (e) =>
          reject(listenError(e, { name: 'PORT', setting: 'server.port', port, host: s.host })),
        );
        const opts: net.ListenOptions & { reusePort?: boolean } = { port, host: s.host };
        if (d.reusePort) opts.reusePort = true;
        listener.listen(opts, () => {
          // Behind TLS the HTTP server never listens itself: this starts its connection
          // tracking (headers and request timeouts, closeIdleConnections), as listening would.
          if (front) server.emit('listening');
          resolve((listener.address() as AddressInfo).port);
        });
      }),
    async drain(graceMs) {
      draining = true;
      // net.Server's close: stop accepting; http.Server's would also drop idle keep-alive
      // connections at once, racing clients that are sending on them.
      const closed = new Promise<void>((r) => net.Server.prototype.close.call(listener, () => r()));
      let quietSince = performance.now();
      const idle = setInterval(() => {
        if (d.capture.recorder.open - tunnels.size > 0) quietSince = performance.now();
        else if (performance.now() - quietSince >= DRAIN_QUIET_MS) server.closeIdleConnections();
      }, 25);
      // HTTP/2 sessions are told GOAWAY now, and cut at the grace like the rest.
      const h2Drained = h2?.drain(graceMs);
      const force = setTimeout(() => {
        server.closeAllConnections();
        // Upgraded sockets are no longer the HTTP server's to close; handshakes were never its.
        tunnels.destroyAll();
        front?.destroyAll();
      }, graceMs);
      await closed;
      await h2Drained;
      clearInterval(idle);
      clearTimeout(force);
      if (front) {
        // Its connection-check timer (started by the 'listening' above) ends with it.
        http.Server.prototype.close.call(server, () => {});
      }
    },
    setTls: (m) => front?.update(m),
    close: () => {
      h2?.close();
      return proxy.close();
    },
  };
}

/** The edge's HTTP/2 side: streams go to the same proxy; /v2 stays on HTTP/1.1. */
function h2Edge(d: EdgeDeps, proxy: ProxyHandler): H2Edge {
  const s = d.cfg.server;
  const onMain = d.cfg.management.on_main;
  return createH2Edge({
    limits: s.http2_limits,
    idleTimeoutMs: s.keep_alive_timeout_ms,
    requestTimeoutMs: s.request_timeout_ms,
    sendTimeoutMs: s.send_timeout_ms,
    handle: (req, res, expectsContinue) => proxy.handle(req, res, expectsContinue),
    http1Only: (url) => onMain && isManagementPath(url) && !holdsGatewayKey(url),
    goaway: d.metrics.h2Goaway,
    log: d.log,
    now: () => d.clock.now(),
    threadLabel: d.threadLabel,
  });
}
