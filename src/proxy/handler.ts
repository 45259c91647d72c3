import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import { authenticate, hasScope, scopeError } from '../auth/authorize.js';
import type { KeyRing } from '../auth/keyring.js';
import type { Exchange, Recorder } from '../capture/recorder.js';
import { type ErrorType, errorBody, GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import type { RequestLimiter } from '../ratelimit/types.js';
import type { KeyRecord } from '../store/keys.js';
import { forwardRequestHeaders, forwardResponseHeaders } from './headers.js';
import { type Origin, type Route, type RouteTable, unsafePath, upstreamPath } from './routes.js';

export interface ProxyDeps {
  routes: RouteTable;
  ring: KeyRing;
  limiter: RequestLimiter | null;
  recorder: Recorder;
  metrics: Metrics;
  log: Logger;
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
const READ = new Set(['GET', 'HEAD', 'OPTIONS']);
const MAX_CONSUMER = 128;

export const clientIp = (req: IncomingMessage): string => req.socket.remoteAddress ?? '';

/** Where a request goes: the chosen route and origin, or the error that stops it. */
export class ProxyHandler {
  private readonly agents = new Map<string, http.Agent>();
  private readonly overhead = new Map<string, { observe(v: number): void }>();

  constructor(private readonly d: ProxyDeps) {}

  agentFor(o: Origin): http.Agent {
    const k = `${o.protocol}//${o.hostname}:${o.port}`;
    let a = this.agents.get(k);
    if (!a) {
      const opts = {
        keepAlive: true,
        maxSockets: 1024,
        maxFreeSockets: 256,
        scheduling: 'lifo' as const,
        timeout: 60_000,
      };
      a = o.protocol === 'https:' ? new https.Agent(opts) : new http.Agent(opts);
      this.agents.set(k, a);
    }
    return a;
  }

  /** Answers with the gateway's own error body. */
  fail(
    req: IncomingMessage,
    res: ServerResponse,
    x: Exchange,
    type: ErrorType,
    message?: string,
    extra: string[] = [],
    retryAfter: number | null = null,
    param: string | null = null,
  ): void {
    const err = new GatewayError(type, message);
    const body = JSON.stringify(errorBody(type, x.id, err.message, param, retryAfter));
    x.status = err.status;
    if (!res.headersSent) {
      const h = ['content-type', 'application/json; charset=utf-8', 'content-length', String(Buffer.byteLength(body))];
      h.push('x-wake-id', x.id, 'cache-control', 'no-store');
      if (err.status === 401) h.push('www-authenticate', 'Bearer');
      for (const e of extra) h.push(e);
      res.writeHead(err.status, h);
      res.end(body);
    } else {
      res.destroy();
    }
    x.resBytes += body.length;
    // Drain what the client still sends, so the connection stays usable.
    if (!req.complete) req.resume();
    this.d.recorder.finish(req, x);
  }

  /** Handles one proxied request end to end. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    const x = this.d.recorder.begin();
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const rawPath = q === -1 ? url : url.slice(0, q);
    const query = q === -1 ? '' : url.slice(q);
    res.on('close', () => {
      if (x.done) return;
      // The client went away before the response ended: nginx's 499.
      if (!res.writableFinished) x.status = 499;
      this.d.recorder.finish(req, x);
    });
    const bad = unsafePath(rawPath);
    if (bad) {
      x.route = 'none';
      x.environment = this.d.routes.fallbackEnvironment;
      return this.fail(req, res, x, 'invalid_request', bad, [], null, 'path');
    }
    const route = this.d.routes.match(rawPath);
    if (!route) {
      x.route = 'none';
      x.environment = this.d.routes.fallbackEnvironment;
      return this.fail(req, res, x, 'resource_missing', 'no route matches this path');
    }
    x.route = route.name;
    const now = x.start;
    const cfg = route.cfg;
    let key: KeyRecord | null = null;
    const authHeader = req.headers.authorization;
    if (cfg.auth === 'required' || (cfg.auth === 'optional' && authHeader !== undefined)) {
      const a = authenticate(this.d.ring, authHeader, now);
      if (a.error) {
        x.environment = a.key?.environment ?? route.defaultEnvironment;
        if (a.key) {
          x.key = a.key;
          x.consumer = a.key.consumer;
        }
        return this.failWith(req, res, x, a.error);
      }
      key = a.key;
      if (cfg.scopes) {
        const scope = READ.has(req.method ?? '') ? cfg.scopes.read : cfg.scopes.write;
        if (!hasScope(key, scope)) {
          x.key = key;
          x.consumer = key.consumer;
          x.environment = key.environment;
          return this.failWith(req, res, x, scopeError(scope));
        }
      }
      this.d.ring.touch(key.id, now);
      x.key = key;
      x.consumer = key.consumer;
      x.environment = key.environment;
    } else {
      x.environment = route.defaultEnvironment;
      const c = req.headers['x-consumer-id'];
      if (typeof c === 'string' && c !== '') x.consumer = c.length > MAX_CONSUMER ? c.slice(0, MAX_CONSUMER) : c;
    }
    const origin = route.origins.get(x.environment);
    if (!origin) {
      return this.fail(
        req,
        res,
        x,
        'resource_missing',
        `route ${route.name} has no origin for environment ${x.environment}`,
      );
    }
    let limitHeaders: string[] | null = null;
    if (this.d.limiter) {
      const policy = cfg.rate_limit !== 'default' ? cfg.rate_limit : null;
      const decision = this.d.limiter.check(key, clientIp(req), policy, now);
      if (!decision.allowed) {
        this.d.metrics.rateLimited.labels(decision.policy ?? 'unknown').inc();
        return this.fail(req, res, x, 'rate_limit_exceeded', undefined, decision.headers, decision.retryAfter);
      }
      limitHeaders = decision.headers;
    }
    this.forward(req, res, x, route, origin, upstreamPath(route, origin, rawPath, query), key, limitHeaders, true);
  }

  private failWith(req: IncomingMessage, res: ServerResponse, x: Exchange, e: GatewayError): void {
    this.fail(req, res, x, e.type, e.message, [], e.retryAfter, e.param);
  }

  private forward(
    req: IncomingMessage,
    res: ServerResponse,
    x: Exchange,
    route: Route,
    origin: Origin,
    path: string,
    key: KeyRecord | null,
    limitHeaders: string[] | null,
    mayRetry: boolean,
  ): void {
    const headers = forwardRequestHeaders(req.rawHeaders, {
      dropAuthorization: key !== null,
      clientIp: clientIp(req),
      proto: 'http',
      originHost: origin.host,
      identity: key ? [key.id, key.consumer, key.environment] : null,
    });
    const lib = origin.protocol === 'https:' ? https : http;
    const up = lib.request({
      protocol: origin.protocol,
      hostname: origin.hostname,
      port: origin.port,
      method: req.method,
      path,
      headers,
      agent: this.agentFor(origin),
    });
    if (x.tUp === 0) {
      x.tUp = performance.now();
      let h = this.overhead.get(x.route);
      if (h === undefined) {
        h = this.d.metrics.overhead.labels(x.route);
        this.overhead.set(x.route, h);
      }
      h.observe((x.tUp - x.t0) / 1000);
    }
    let timedOut = false;
    let sentBody = false;
    const timer = setTimeout(() => {
      timedOut = true;
      up.destroy(new Error('upstream timeout'));
    }, route.cfg.timeout_ms);

    const onClientClose = () => {
      if (!res.writableFinished) up.destroy();
    };
    res.once('close', onClientClose);

    up.on('response', (ures) => {
      clearTimeout(timer);
      x.status = ures.statusCode ?? 502;
      const extra = ['x-wake-id', x.id];
      if (limitHeaders) for (const h of limitHeaders) extra.push(h);
      res.sendDate = false;
      res.writeHead(x.status, ures.statusMessage, forwardResponseHeaders(ures.rawHeaders, extra));
      ures.on('data', (chunk: Buffer) => {
        x.resBytes += chunk.length;
        if (!res.write(chunk)) ures.pause();
      });
      res.on('drain', () => ures.resume());
      ures.on('end', () => {
        res.end();
      });
      const broken = () => {
        // The origin broke off mid-response: record it as such, then cut the client off.
        x.status = 502;
        this.d.recorder.finish(req, x);
        res.destroy();
      };
      ures.on('error', broken);
      ures.on('aborted', broken);
    });

    up.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      res.off('close', onClientClose);
      if (res.headersSent || res.destroyed) {
        if (!res.destroyed) res.destroy();
        return;
      }
      if (timedOut) return this.fail(req, res, x, 'upstream_timeout');
      // A pooled connection the origin closed while we reused it: safe to retry once.
      if (mayRetry && up.reusedSocket && !sentBody && err.code === 'ECONNRESET' && IDEMPOTENT.has(req.method ?? '')) {
        return this.forward(req, res, x, route, origin, path, key, limitHeaders, false);
      }
      this.d.log.debug('upstream error', { route: x.route, code: err.code });
      this.fail(req, res, x, 'upstream_unavailable', `the origin could not be reached (${err.code ?? 'error'})`);
    });

    // No body (RFC 9112 §6.3: neither Content-Length nor Transfer-Encoding): headers go in one write.
    if (!mayRetry || (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined)) {
      up.end();
      return;
    }
    req.on('data', (chunk: Buffer) => {
      sentBody = true;
      x.reqBytes += chunk.length;
      if (!up.write(chunk)) req.pause();
    });
    up.on('drain', () => req.resume());
    req.on('end', () => up.end());
    req.on('error', () => up.destroy());
  }

  close(): void {
    for (const a of this.agents.values()) a.destroy();
  }
}
