import { type Origin, type Route, type RouteTable, upstreamPath } from './routes.js';

/**
 * Keyed routes whose paths at their origin a route without a key reaches too. Longest
 * prefix wins, so a public `/` beside a keyed `/payments` on one origin is safe: the
 * client's `/payments/x` is the keyed route's. But a keyed route that strips its prefix
 * (`strip_prefix: true`), or whose origin URL has another base path, sends its requests
 * to paths the public route also sends its own to: `/x` through the public route is
 * `/payments/x` through the keyed one, with no key. Each such pair is one line (a start
 * warning: it may be meant, but it is never what a keyed route suggests).
 */
export function keyedPathsExposed(table: RouteTable): string[] {
  const out: string[] = [];
  for (const keyed of table.all) {
    if (!needsKey(keyed)) continue;
    for (const [env, origin] of keyed.origins) {
      // Where the keyed route's requests begin at its origin: what it sends for its own prefix.
      const start = upstreamPath(keyed, origin, keyed.prefix, '');
      for (const open of table.all) {
        if (needsKey(open)) continue;
        const o = open.origins.get(env);
        if (o === undefined || !sameOrigin(o, origin)) continue;
        const client = clientPathTo(open, o, start);
        // Only when the path that would reach it is routed to the open route (else the longest prefix guards it).
        if (client === null || table.match(client) !== open) continue;
        out.push(
          `routes ${keyed.name} and ${open.name} (${env}): ${keyed.name} needs a key, but its requests go to ${origin.protocol}//${origin.host}${start}…, which ${open.name} (auth: ${open.cfg.auth}) reaches with none: ${client} through ${open.name} is ${keyed.prefix} through ${keyed.name}. Give them different origins or base paths, or drop strip_prefix`,
        );
      }
    }
  }
  return out;
}

const needsKey = (r: Route): boolean => r.cfg.auth === 'required' || r.cfg.auth === 'mtls';

const sameOrigin = (a: Origin, b: Origin): boolean =>
  a.protocol === b.protocol && a.hostname.toLowerCase() === b.hostname.toLowerCase() && a.port === b.port;

/** The client path `route` sends to `target` at `origin`, or null when none does. */
function clientPathTo(route: Route, origin: Origin, target: string): string | null {
  if (!target.startsWith(origin.basePath)) return null;
  let rest = target.slice(origin.basePath.length);
  if (rest === '' || rest.charCodeAt(0) !== 47) rest = `/${rest}`;
  if (route.cfg.strip_prefix && route.prefix !== '/') {
    const p = route.prefix.endsWith('/') ? route.prefix.slice(0, -1) : route.prefix;
    return rest === '/' ? p : p + rest;
  }
  return rest;
}
