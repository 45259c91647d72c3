import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import http from 'node:http';
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import { KEY_IN_URL } from './admission/refusal.js';
import { toOriginForm } from './admission/target.js';
import { type Exchange, PEER, type Recorder, type WithPeer } from './capture/recorder.js';
import { holdsGatewayKey } from './capture/text.js';
import type { Config } from './config/index.js';
import type { ListenerTls } from './config/tls-schema.js';
import { consoleHandler } from './console/serve.js';
import { isManagementPath } from './edge.js';
import { errorBody } from './errors.js';
import { consoleH2 } from './h2/console.js';
import { apiBodyLimits, BODY_REFUSED, bodyRefusal, type WithBodyRefused } from './management-body.js';
import type { Metrics } from './metrics/index.js';
import { createOpsServer } from './ops.js';
import type { Part } from './root.js';
import { listenError } from './startup.js';
import { internalListener } from './threads/internal-listener.js';
import type { EdgePool } from './threads/pool.js';
import { listenerTls } from './tls/edge-tls.js';
import type { TlsFront } from './tls/front.js';
import type { Reloadable } from './tls/part.js';

export interface ListenerDeps {
  cfg: Readonly<Config>;
  metrics: Metrics;
  management: http.Server;
  /** Answers a /v2 call, saying which listener it came on (a call an edge thread handed over came on the main one). */
  api: { manage: (req: IncomingMessage, res: ServerResponse, on: 'main' | 'management') => void };
  /** The client's address of a request (behind server.trusted_proxies, X-Forwarded-For's), kept on its wake (admission.ts clientOf). */
  clientOf: (req: IncomingMessage, x: Exchange) => string;
  recorder: Recorder;
  fallbackEnv: string;
  mainPort: () => number;
  pool: () => EdgePool | null;
  testHooks: boolean;
  /** Edge threads (the internal listener's connection limit follows). */
  threads: number;
  refresh: () => void;
  ready: () => Promise<{ ok: boolean; body: Record<string, unknown> }>;
}

/**
 * The control thread's listeners: ops (/metrics of every thread, /healthz, /readyz,
 * and by default the console and /v2), the management listener when it has its own
 * port, and with edge threads a loopback listener for the /v2 calls they hand over.
 */
export function listenersPart(d: ListenerDeps): Part & {
  ops: http.Server;
  /** The TLS listeners here (server.ops_tls, management.tls), for certificate reloads. */
  reloadable: Reloadable[];
  management: http.Server;
  internal: (needed: boolean) => Promise<void>;
  internalAddress: () => { port: number; token: string };
  listen: () => Promise<{ opsPort: number; managementPort: number }>;
} {
  const { cfg } = d;
  const separate = cfg.management.listener === 'separate';
  const ops = createOpsServer({
    server: cfg.server,
    scrape: async () => {
      d.refresh();
      const pool = d.pool();
      return pool ? pool.metrics(await d.metrics.registry.getMetricsAsJSON()) : d.metrics.registry.metrics();
    },
    contentType: d.metrics.registry.contentType,
    ready: d.ready,
    // The ops listener's other paths are the management listener's, unless that has its own port.
    other: separate ? null : (req, res) => d.management.emit('request', req, res),
  });
  // TLS in front of the ops listener (server.ops_tls) and of a separate management listener (management.tls).
  const tlsOf = (http: http.Server, settings: ListenerTls | null, at: string, listener: string) =>
    listenerTls({
      http,
      settings,
      at,
      listener,
      metrics: d.metrics,
      handshakeTimeoutMs: cfg.server.headers_timeout_ms,
      // The console over HTTP/2 too when server.http2 allows it (a browser asks for h2 by ALPN).
      acceptH2:
        cfg.server.http2 === false
          ? null
          : consoleH2({
              http,
              limits: cfg.server.http2_limits,
              idleTimeoutMs: cfg.server.keep_alive_timeout_ms,
              requestTimeoutMs: cfg.server.request_timeout_ms,
              goaway: d.metrics.h2Goaway,
            }),
    });
  const opsTls = tlsOf(ops, cfg.server.ops_tls, 'server.ops_tls', 'ops');
  const managementTls = separate ? tlsOf(d.management, cfg.management.tls, 'management.tls', 'management') : null;
  const fronts = new Map<http.Server, TlsFront>();
  if (opsTls) fronts.set(ops, opsTls.front);
  if (managementTls) fronts.set(d.management, managementTls.front);
  const handle = managementHandler(d);
  // An absolute-form target is read as its path, with its authority as Host (admission/target.ts).
  const serve = (req: IncomingMessage, res: ServerResponse) => {
    toOriginForm(req);
    handle(req, res);
  };
  d.management.on('request', serve);
  d.management.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    res.writeContinue();
    serve(req, res);
  });
  const token = randomBytes(32).toString('base64url');
  // Only connections that showed the token count against the edges' pools (internal-listener.ts).
  const internal = internalListener({
    token,
    threads: d.threads,
    serve: (req, res, peer, refused) => {
      (req as WithPeer)[PEER] = peer;
      // The edge did not read the body (too large, too slow): the API answers so once the call is admitted.
      if (refused !== null) (req as WithBodyRefused)[BODY_REFUSED] = bodyRefusal(refused, apiBodyLimits(cfg.server));
      d.api.manage(req, res, 'main');
    },
  });
  const listen = (server: http.Server, port: number, host: string, name: string, setting: string) =>
    new Promise<number>((resolve, reject) => {
      const front = fronts.get(server);
      const l: net.Server = front?.server ?? server;
      l.once('error', (e) => reject(listenError(e, { name, setting, port, host })));
      l.listen(port, host, () => {
        // Behind TLS the HTTP server never listens itself: this starts its connection tracking.
        if (front) server.emit('listening');
        resolve((l.address() as AddressInfo).port);
      });
    });
  const close = async (server: http.Server) => {
    const front = fronts.get(server);
    if (front) {
      if (!front.server.listening) return;
      const closed = new Promise<void>((r) => front.server.close(() => r()));
      http.Server.prototype.close.call(server);
      server.closeAllConnections();
      front.destroyAll();
      return closed;
    }
    if (!server.listening) return;
    await new Promise<void>((r) => server.close(() => r()));
    server.closeAllConnections();
  };
  return {
    name: 'listeners',
    ops,
    reloadable: [opsTls?.reloadable, managementTls?.reloadable].filter((r) => r !== undefined),
    management: d.management,
    /** With edge threads: the loopback listener they hand /v2 calls to. */
    internal: async (needed: boolean) => {
      if (needed) await listen(internal, 0, '127.0.0.1', 'internal', 'server.threads');
    },
    internalAddress: () => ({ port: (internal.address() as AddressInfo).port, token }),
    async listen() {
      const s = cfg.server;
      const m = cfg.management;
      const opsPort = await listen(ops, s.ops_port, s.ops_host, 'OPS_PORT', 'server.ops_port');
      const managementPort = separate
        ? await listen(d.management, m.port, m.host, 'management.port', 'management.port')
        : opsPort;
      return { opsPort, managementPort };
    },
    async close() {
      await close(internal);
      await close(ops);
      await close(d.management);
    },
  };
}

/**
 * What the management listener serves (the ops listener's other paths, or a
 * listener of its own): the console and /v2, and nothing it would proxy. The
 * console never shares an origin with a proxied app, whose pages could otherwise
 * read the signed-in key.
 */
function managementHandler(d: ListenerDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const cfg = d.cfg;
  const consoleApp = cfg.console.enabled ? consoleHandler(cfg.console.path, d.mainPort, cfg.tracing.trace_url) : null;
  const crash = /^\/__test\/edges\/(\d+)\/crash$/;
  return (req, res) => {
    const url = req.url ?? '/';
    if (consoleApp?.owns(url)) {
      const x = d.recorder.begin();
      x.route = 'console';
      if (req.httpVersionMajor === 2) x.protocol = 'h2';
      x.environment = d.fallbackEnv;
      d.clientOf(req, x);
      x.status = consoleApp.handle(req, res, x.id);
      req.resume();
      return d.recorder.finish(req, x);
    }
    const hook = d.testHooks && req.method === 'POST' ? crash.exec(url) : null;
    if (hook) {
      const ok = d.pool()?.crash(Number(hook[1])) ?? false;
      res.writeHead(ok ? 202 : 404).end();
      return;
    }
    const keyInUrl = holdsGatewayKey(url);
    if (isManagementPath(url) && !keyInUrl) return d.api.manage(req, res, 'management');
    const body = JSON.stringify(
      keyInUrl
        ? errorBody(KEY_IN_URL.type, null, KEY_IN_URL.message, KEY_IN_URL.param)
        : errorBody(
            'resource_missing',
            null,
            'this listener serves the console and /v2 only; requests are proxied on the main listener',
          ),
    );
    req.resume();
    res.writeHead(keyInUrl ? 400 : 404, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  };
}
