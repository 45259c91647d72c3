import type { IncomingMessage } from 'node:http';
import { authenticate, hasScope, scopeError } from '../auth/authorize.js';
import type { KeyRecord } from '../auth/key.js';
import type { KeyRing } from '../auth/keyring.js';
import type { Exchange } from '../capture/recorder.js';
import { holdsGatewayKey } from '../capture/text.js';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics/index.js';
import type { LimitDecision, RequestLimiter } from '../ratelimit/types.js';
import { type Origin, type Route, type RouteTable, unsafePath, upstreamPath } from './routes.js';

export interface AdmitDeps {
  routes: RouteTable;
  ring: KeyRing;
  limiter: RequestLimiter | null;
  metrics: Metrics;
  /** True for a client address listed in server.trusted_proxies. */
  trusted: (ip: string) => boolean;
}

/** Where an admitted request goes. */
export interface Admitted {
  route: Route;
  origin: Origin;
  /** Path and query as sent upstream. */
  path: string;
  key: KeyRecord | null;
  /** Rate-limit headers for the response (null when unlimited). */
  limitHeaders: string[] | null;
}

/** Why a request is refused; `headers` go on the refusal (rate-limit headers of a 429). */
export interface Refused {
  error: GatewayError;
  headers: string[];
}

/** Of the refusals past the unauthenticated limit, one in this many is stored as a wake (all are counted). */
const FLOOD_SAMPLE = 100;
let floodSeq = 0;

const READ = new Set(['GET', 'HEAD', 'OPTIONS']);
/** The refusal of a request with a gateway key in its URL (the management listener gives it too). */
export const KEY_IN_URL = new GatewayError(
  'invalid_request',
  'a gateway key was sent in the URL; send it in the Authorization header only, and revoke this one: URLs are logged along the way',
  'url',
);
const MAX_CONSUMER = 128;
const NONE: string[] = [];

const UNAVAILABLE = new GatewayError(
  'service_unavailable',
  'rate limits cannot be checked: the coordination server does not answer (coordination.on_unavailable: closed)',
  null,
  1,
);

function limited(d: AdmitDeps, decision: LimitDecision): Refused {
  if (decision.unavailable) return { error: UNAVAILABLE, headers: decision.headers };
  d.metrics.rateLimited.labels(decision.policy ?? 'unknown').inc();
  return {
    error: new GatewayError('rate_limit_exceeded', undefined, null, decision.retryAfter),
    headers: decision.headers,
  };
}

export const clientIp = (req: IncomingMessage): string => req.socket.remoteAddress ?? '';

/**
 * The edge rules every proxied request passes, plain or WebSocket upgrade: a safe
 * path, a route, the key (checked when the route wants one), its scope (read for
 * GET/HEAD/OPTIONS, write otherwise), the key's environment choosing the origin,
 * and the rate limit. Fills in the exchange (route, key, consumer, environment) as
 * it learns them, so a refused request is recorded with all it is known to be.
 */
export function admit(
  d: AdmitDeps,
  req: IncomingMessage,
  x: Exchange,
): Admitted | Refused | Promise<Admitted | Refused> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const rawPath = q === -1 ? url : url.slice(0, q);
  x.path = rawPath;
  x.environment = d.routes.fallbackEnvironment;
  const bad = unsafePath(rawPath);
  if (bad) {
    x.route = 'none';
    return { error: new GatewayError('invalid_request', bad, 'path'), headers: NONE };
  }
  // A key in a URL ends up in every log and history on its way: refused, never forwarded
  // (the wake keeps the path with the key replaced, see the recorder).
  if (holdsGatewayKey(url)) {
    x.route = 'none';
    return { error: KEY_IN_URL, headers: NONE };
  }
  const route = d.routes.match(rawPath);
  if (!route) {
    x.route = 'none';
    return { error: new GatewayError('resource_missing', 'no route matches this path'), headers: NONE };
  }
  x.route = route.name;
  x.environment = route.defaultEnvironment;
  const cfg = route.cfg;
  let key: KeyRecord | null = null;
  const authHeader = req.headers.authorization;
  if (cfg.auth === 'required' || (cfg.auth === 'optional' && authHeader !== undefined)) {
    const a = authenticate(d.ring, authHeader, x.start);
    if (a.key) {
      // Known even when refused (revoked, missing scope): the wake names the key.
      x.key = a.key;
      x.consumer = a.key.consumer;
      x.environment = a.key.environment;
    }
    if (a.error) {
      // Refused keys are limited per address (`unauthenticated`); past it, 429, and
      // only a sample of those refusals is stored. The key lookup itself is one
      // in-memory hash, so it runs first: a valid key is never refused because
      // others behind the same address (a NAT) send bad ones.
      const over = d.limiter?.refused(clientIp(req), x.start) ?? null;
      const error = a.error;
      if (over instanceof Promise) return over.then((o) => refusedKey(d, x, error, o));
      return refusedKey(d, x, error, over);
    }
    key = a.key;
    if (cfg.scopes) {
      const scope = READ.has(req.method ?? '') ? cfg.scopes.read : cfg.scopes.write;
      if (!hasScope(key, scope)) return { error: scopeError(scope), headers: NONE };
    }
    d.ring.touch(key.id, x.start);
  } else {
    const c = req.headers['x-consumer-id'];
    if (typeof c === 'string' && c !== '') x.consumer = c.length > MAX_CONSUMER ? c.slice(0, MAX_CONSUMER) : c;
  }
  const origin = route.origins.get(x.environment);
  if (!origin) {
    const msg = `route ${route.name} has no origin for environment ${x.environment}`;
    return { error: new GatewayError('resource_missing', msg), headers: NONE };
  }
  const policy = cfg.rate_limit !== 'default' ? cfg.rate_limit : null;
  const decision = d.limiter ? d.limiter.check(key, clientIp(req), policy, x.start) : null;
  // A closure only when the decision waits on Redis: the usual path allocates none.
  if (decision instanceof Promise) return decision.then((dec) => settle(d, dec, route, origin, key, rawPath, url, q));
  return settle(d, decision, route, origin, key, rawPath, url, q);
}

/** A refused key's answer: its 401/403, or the 429 of the per-address limit (sampled as wakes). */
function refusedKey(d: AdmitDeps, x: Exchange, error: GatewayError, over: LimitDecision | null): Refused {
  if (!over) return { error, headers: NONE };
  x.sampledOut = ++floodSeq % FLOOD_SAMPLE !== 0;
  return limited(d, over);
}

/** Refused by the limit, or admitted with its upstream path (made only now). */
function settle(
  d: AdmitDeps,
  dec: LimitDecision | null,
  route: Route,
  origin: Origin,
  key: KeyRecord | null,
  rawPath: string,
  url: string,
  q: number,
): Admitted | Refused {
  if (dec !== null && !dec.allowed) return limited(d, dec);
  const path = upstreamPath(route, origin, rawPath, q === -1 ? '' : url.slice(q));
  return { route, origin, path, key, limitHeaders: dec === null ? null : dec.headers };
}
