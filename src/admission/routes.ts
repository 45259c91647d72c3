import { DetailRate, type DetailSettings, detailSettings } from '../capture/detail.js';
import type { Config, RouteConfig } from '../config/index.js';
import { type OriginTrust, originTrust } from '../tls/origin-trust.js';
import type { Gate } from './gate.js';

export interface Origin {
  environment: string;
  protocol: 'http:' | 'https:';
  hostname: string;
  port: number;
  /** Base path of the origin URL without a trailing slash ('' for none). */
  basePath: string;
  /** host[:port] as the Host header should carry it. */
  host: string;
  /** How an https:// origin is verified (the route's tls block); null: the system CAs and the URL's host. */
  trust: OriginTrust | null;
}

/** A proxied route: what admission asks of its requests (Gate), and how the proxy forwards them. */
export interface Route extends Gate {
  cfg: RouteConfig;
  /** What this route's wakes keep of the exchange (null: summaries only). */
  detail: DetailSettings | null;
  name: string;
  prefix: string;
  /** Environment used when no key chooses one: the first origin's. */
  defaultEnvironment: string;
  origins: Map<string, Origin>;
  /** Protocols an Upgrade may switch to (lower case). */
  upgrades: ReadonlySet<string>;
}

function parseOrigin(environment: string, url: string, trust: OriginTrust | null): Origin {
  const u = new URL(url);
  const protocol = u.protocol === 'https:' ? 'https:' : 'http:';
  const port = u.port ? Number(u.port) : protocol === 'https:' ? 443 : 80;
  return {
    environment,
    protocol,
    hostname: u.hostname.replace(/^\[|\]$/g, ''),
    port,
    basePath: u.pathname.replace(/\/+$/, ''),
    host: u.host,
    trust: protocol === 'https:' ? trust : null,
  };
}

/** Longest-prefix route table. A prefix matches itself and anything below it (`/a` matches `/a/b`, not `/ab`). */
export class RouteTable {
  private readonly routes: Route[];

  /** Environment of wakes that match no route: the first live environment. */
  readonly fallbackEnvironment: string;

  constructor(
    routes: Config['routes'],
    environments: Config['environments'],
    capture: Pick<Config['capture'], 'detail'> | null = null,
  ) {
    this.fallbackEnvironment =
      Object.entries(environments).find(([, e]) => e.class === 'live')?.[0] ?? (Object.keys(environments)[0] as string);
    this.routes = routes
      .map((cfg, i) => {
        const trust = originTrust(cfg.tls, `routes[${i}].tls`);
        const origins = new Map(Object.entries(cfg.origins).map(([env, url]) => [env, parseOrigin(env, url, trust)]));
        const d = capture ? { ...capture.detail, ...cfg.capture.detail } : null;
        return {
          cfg,
          detail:
            d && (d.headers || d.bodies)
              ? detailSettings({
                  headers: d.headers,
                  bodies: d.bodies,
                  maxBodyBytes: d.max_body_bytes,
                  rate: new DetailRate(d.max_per_second, d.max_bytes_per_second),
                  keepOpaque: d.opaque_bodies === 'keep',
                })
              : null,
          name: cfg.name,
          auth: cfg.auth,
          scopes: cfg.scopes ?? null,
          policy: cfg.rate_limit !== 'default' ? cfg.rate_limit : null,
          prefix: cfg.prefix,
          defaultEnvironment: Object.keys(cfg.origins)[0] as string,
          origins,
          upgrades: new Set((cfg.upgrades ?? ['websocket']).map((u) => u.toLowerCase())),
        };
      })
      .sort((a, b) => b.prefix.length - a.prefix.length);
  }

  byName(name: string): Route | undefined {
    return this.routes.find((r) => r.name === name);
  }

  /** Matches the raw (undecoded) path, so encoded tricks cannot move a request to another route. */
  match(path: string): Route | null {
    for (const r of this.routes) {
      const p = r.prefix;
      if (!path.startsWith(p)) continue;
      if (path.length === p.length || p.endsWith('/') || path.charCodeAt(p.length) === 47) return r;
    }
    return null;
  }
}

/**
 * A dot segment, also percent-encoded, also with a path parameter: Tomcat and
 * Spring read `/a/..;x/b` (and `..%3b`) as `/a/../b`.
 */
const DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?:(?:;|%3b)[^/]*)?(?:\/|$)/i;
/** Double encoding (`%252e`, `%252f`, `%255c`): an origin that decodes twice sees a dot or a slash. */
const DOUBLE_ENCODED = /%25(?:2e|2f|5c|3b)/i;

/**
 * Rejects request targets an origin could resolve to a different route than the
 * gateway matched: dot segments (`/a/../b`, also percent-encoded), an encoded
 * slash (`%2f`), a backslash, or anything not in origin-form (RFC 9112 §3.2.1).
 */
export function unsafePath(path: string): string | null {
  if (path.charCodeAt(0) !== 47) return 'the request target must start with /';
  if (DOT_SEGMENT.test(path)) return 'the path must not contain dot segments';
  if (path.includes('%2f') || path.includes('%2F') || path.includes('%5c') || path.includes('%5C')) {
    return 'the path must not contain an encoded slash or backslash';
  }
  if (path.includes('\\')) return 'the path must not contain a backslash';
  if (path.includes('%25') && DOUBLE_ENCODED.test(path)) return 'the path must not contain double-encoded characters';
  return null;
}

/** Path sent upstream: the raw path (optionally without the route prefix) under the origin's base path. */
export function upstreamPath(route: Route, origin: Origin, rawPath: string, query: string): string {
  let p = rawPath;
  if (route.cfg.strip_prefix && route.prefix !== '/') {
    p = rawPath.slice(route.prefix.length);
    if (p === '' || p.charCodeAt(0) !== 47) p = `/${p}`;
  }
  return origin.basePath + p + query;
}
