import type { EnvClass } from '../auth/secrets.js';
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
  /** How long a new connection (with an https origin's handshake) may take (routes[].connect_timeout_ms). */
  connectTimeoutMs: number;
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

function parseOrigin(environment: string, url: string, trust: OriginTrust | null, connectTimeoutMs: number): Origin {
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
    connectTimeoutMs,
  };
}

/** A route under the prefix a lenient origin reads for it (see RouteTable.ambiguity). */
interface Lenient {
  route: Route;
  prefix: string;
}

/** Whether `path` starts with `prefix` on whole segments: the prefix, or the prefix then `/` (or a prefix ending in `/`). */
function under(path: string, prefix: string): boolean {
  return (
    path.startsWith(prefix) &&
    (path.length === prefix.length || prefix.endsWith('/') || path.charCodeAt(prefix.length) === 47)
  );
}

/** The first of `list` (longest prefix first) whose prefix `path` is under. */
function longest(list: readonly Lenient[], path: string): Lenient | null {
  for (const l of list) if (under(path, l.prefix)) return l;
  return null;
}

/** Longest-prefix route table. A prefix matches itself and anything below it (`/a` matches `/a/b`, not `/ab`). */
export class RouteTable {
  private readonly routes: Route[];
  /** The routes under their prefixes as a lenient origin reads them (lenientPath), longest first. */
  private readonly lenient: Lenient[];
  /** The same, ASCII case folded: what a case-insensitive origin reads. */
  private readonly folded: Lenient[];
  /**
   * The longest prefix + 1: which route a path matches depends on its first `scan`
   * characters only, so a path with nothing lenientPath or case folding changes in
   * them matches the same route however an origin reads the rest.
   */
  private readonly scan: number;
  /** A prefix that lenientPath or case folding changes: every path is read leniently. */
  private readonly always: boolean;

  /** Environment of wakes that match no route: the first live environment. */
  readonly fallbackEnvironment: string;
  /** Each configured environment's class (own names only). */
  private readonly classes: ReadonlyMap<string, EnvClass>;

  constructor(
    routes: Config['routes'],
    environments: Config['environments'],
    capture: Pick<Config['capture'], 'detail'> | null = null,
  ) {
    this.fallbackEnvironment =
      Object.entries(environments).find(([, e]) => e.class === 'live')?.[0] ?? (Object.keys(environments)[0] as string);
    this.classes = new Map(Object.entries(environments).map(([name, e]) => [name, e.class]));
    this.routes = routes
      .map((cfg, i) => {
        const trust = originTrust(cfg.tls, `routes[${i}].tls`);
        const origins = new Map(
          Object.entries(cfg.origins).map(([env, url]) => [env, parseOrigin(env, url, trust, cfg.connect_timeout_ms)]),
        );
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
    const view = (f: (prefix: string) => string) =>
      this.routes
        .map((route) => ({ route, prefix: f(route.prefix) }))
        .sort((a, b) => b.prefix.length - a.prefix.length);
    this.lenient = view(lenientPath);
    this.folded = view((p) => asciiLower(lenientPath(p)));
    this.scan = (this.routes[0]?.prefix.length ?? 0) + 1;
    this.always = this.routes.some((r) => asciiLower(lenientPath(r.prefix)) !== r.prefix);
  }

  /** The class of a configured environment; null for a name the config does not have. */
  classOf(environment: string): EnvClass | null {
    return this.classes.get(environment) ?? null;
  }

  byName(name: string): Route | undefined {
    return this.routes.find((r) => r.name === name);
  }

  /** Matches the raw (undecoded) path, so encoded tricks cannot move a request to another route. */
  /** Every route, longest prefix first. */
  get all(): readonly Route[] {
    return this.routes;
  }

  match(path: string): Route | null {
    for (const r of this.routes) {
      const p = r.prefix;
      if (!path.startsWith(p)) continue;
      if (path.length === p.length || p.endsWith('/') || path.charCodeAt(p.length) === 47) return r;
    }
    return null;
  }

  /**
   * Why `path`, which matches `route` as sent, is refused: a lenient origin may read
   * it as another route (or none). Lenient origins percent-decode unreserved
   * characters (RFC 3986 §6.2.2.2; Go, Werkzeug, Django, Spring), drop `;params`
   * from every segment (Tomcat, Spring), merge repeated slashes, or ignore case; if
   * the path read that way matches another route than the raw path, the gateway would
   * check one route's key and scope for a request the origin serves as the other's.
   * The path is never rewritten: it is refused (null: forwarded as sent).
   *
   * Cheap for ordinary paths: a scan of the characters that can decide the route
   * (the longest prefix + 1) for `%`, `;`, `//` or A-Z; only a path with one of them
   * there is read leniently and matched twice more.
   */
  ambiguity(path: string, route: Route): string | null {
    if (!this.always && !this.mayRead(path)) return null;
    const norm = lenientPath(path);
    const a = this.differs(norm, route, this.lenient) ?? this.differs(asciiLower(norm), route, this.folded);
    if (a === null) return null;
    const as = a.route === null ? 'a path outside every route' : `route ${a.route.name}`;
    return `ambiguous path: an origin may read it as ${as}, the gateway as route ${route.name}; send the route prefix as configured, without percent-encoded letters, ;parameters, repeated slashes or another case`;
  }

  /** Whether the first `scan` characters of `path` hold `%`, `;`, `//` or an ASCII capital. */
  private mayRead(path: string): boolean {
    const n = Math.min(path.length, this.scan);
    let prev = 0;
    for (let i = 0; i < n; i++) {
      const c = path.charCodeAt(i);
      if (c === 37 || c === 59 || (c >= 65 && c <= 90) || (c === 47 && prev === 47)) return true;
      prev = c;
    }
    return false;
  }

  /**
   * The route (or null: none) `read` matches in `view` when it is not `route`. Two
   * routes whose prefixes read the same (`/a` and `/A` folded) are one place to a
   * lenient origin and to this check: the configuration, not the request, is what
   * makes them ambiguous.
   */
  private differs(read: string, route: Route, view: readonly Lenient[]): { route: Route | null } | null {
    const got = longest(view, read);
    if (got !== null && got.route === route) return null;
    const own = view.find((l) => l.route === route);
    if (got !== null && own !== undefined && own.prefix === got.prefix) return null;
    return { route: got?.route ?? null };
  }
}

function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const l = c | 32;
  return l >= 97 && l <= 102 ? l - 87 : -1;
}

/** The character the two hex digits at `at` of `s` encode, when it is unreserved (RFC 3986 §2.3); else ''. */
function unreservedAt(s: string, at: number): string {
  if (at + 1 >= s.length) return '';
  const hi = hexDigit(s.charCodeAt(at));
  const lo = hexDigit(s.charCodeAt(at + 1));
  if (hi < 0 || lo < 0) return '';
  const c = hi * 16 + lo;
  const unreserved =
    (c >= 48 && c <= 57) ||
    (c >= 65 && c <= 90) ||
    (c >= 97 && c <= 122) ||
    c === 45 ||
    c === 46 ||
    c === 95 ||
    c === 126;
  return unreserved ? String.fromCharCode(c) : '';
}

/**
 * `path` as a lenient origin may read it: percent-encoded unreserved characters
 * decoded (`%70` is `p`; `%2570` too, for an origin that decodes twice), `;params`
 * dropped from every segment (`/a;x/b` is `/a/b`), repeated slashes merged (`//a`
 * is `/a`). Dot segments, encoded slashes and backslashes are refused before
 * (unsafePath) and are left as they are.
 */
export function lenientPath(raw: string): string {
  const path = hexDigitsRead(raw);
  let out = '';
  const n = path.length;
  let i = 0;
  while (i < n) {
    const c = path.charCodeAt(i);
    if (c === 47) {
      if (out.charCodeAt(out.length - 1) !== 47) out += '/';
      i++;
    } else if (c === 59) {
      const j = path.indexOf('/', i);
      i = j === -1 ? n : j;
    } else if (c === 37) {
      const once = unreservedAt(path, i + 1);
      // `%25` then an encoded unreserved character: what an origin that decodes twice reads.
      const twice = once === '' && path.startsWith('25', i + 1) ? unreservedAt(path, i + 3) : '';
      if (once !== '') {
        out += once;
        i += 3;
      } else if (twice !== '') {
        out += twice;
        i += 5;
      } else {
        out += '%';
        i++;
      }
    } else {
      out += path[i];
      i++;
    }
  }
  return out;
}

/** ASCII case folding, as case-insensitive origins do (length kept). */
function asciiLower(s: string): string {
  return s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
}

/**
 * A dot segment, also percent-encoded, also with a path parameter: Tomcat and
 * Spring read `/a/..;x/b` (and `..%3b`) as `/a/../b`.
 */
const DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?:(?:;|%3b)[^/]*)?(?:\/|$)/i;
/** Double encoding (`%252e`, `%252f`, `%255c`): an origin that decodes twice sees a dot or a slash. */
const DOUBLE_ENCODED = /%25(?:2e|2f|5c|3b)/i;
/** A percent-encoded hex digit (`%32` is 2, `%65` is e). */
const ENCODED_HEX = /%(3[0-9]|4[1-6]|6[1-6])/gi;
const hexOf = (_m: string, h: string): string => String.fromCharCode(Number.parseInt(h, 16));

/**
 * A path with its percent-encoded hex digits read, when it holds a `%25`: so `%25%37%30`
 * reads as `%2570` and `%25%32%65` as `%252e`, the double encodings an origin that decodes
 * twice reads. Only when there is a `%25`: hex digits are unreserved, read once anyway.
 */
function hexDigitsRead(path: string): string {
  return path.includes('%25') ? path.replace(ENCODED_HEX, hexOf) : path;
}

/**
 * Rejects request targets an origin could resolve to a different route than the
 * gateway matched: dot segments (`/a/../b`, also percent-encoded), an encoded
 * slash (`%2f`), a backslash, a fragment (`#` has no place in a request target,
 * RFC 9112 §3.2, and URL parsers drop what follows it), or anything not in
 * origin-form (RFC 9112 §3.2.1). `query` is the target's `?…` part, if any. What
 * is left to check once the route is known is RouteTable.ambiguity's.
 */
export function unsafePath(path: string, query = ''): string | null {
  if (path.charCodeAt(0) !== 47)
    return 'the request target must be a path (/…) or an http(s) URL with a valid host and no user name (http://host/…)';
  if (path.includes('#') || query.includes('#')) {
    return 'the request target must not contain a fragment (#): origins would drop what follows it';
  }
  if (DOT_SEGMENT.test(path)) return 'the path must not contain dot segments';
  if (path.includes('%2f') || path.includes('%2F') || path.includes('%5c') || path.includes('%5C')) {
    return 'the path must not contain an encoded slash or backslash';
  }
  if (path.includes('\\')) return 'the path must not contain a backslash';
  if (DOUBLE_ENCODED.test(hexDigitsRead(path))) return 'the path must not contain double-encoded characters';
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
