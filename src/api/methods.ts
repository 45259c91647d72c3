import { type ErrorBody, errorBody } from '../errors.js';

/** The answer to a call no /v2 operation takes. */
export interface NoOperation {
  status: 404 | 405;
  /** The Allow header of a 405 (null with a 404). */
  allow: string | null;
  body: ErrorBody;
}

/**
 * The /v2 paths and the methods each takes, so a wrong method is answered 405 with
 * Allow (RFC 9110 §15.5.6) rather than 404, by the router's not-found handler and
 * before the router for a method it does not know.
 */
export class KnownPaths {
  private readonly known: { re: RegExp; methods: Set<string> }[] = [];

  /** A route's path (fastify's `:param` syntax) and its methods. */
  add(url: string, methods: readonly string[]): void {
    const re = new RegExp(`^${url.replace(/:[A-Za-z_]+/g, '[^/]+')}/?$`);
    let k = this.known.find((x) => x.re.source === re.source);
    if (!k) {
      k = { re, methods: new Set() };
      this.known.push(k);
    }
    for (const m of methods) k.methods.add(m);
  }

  /** A call of `method` on `path` (without its query) that no operation takes: 405 when the path has others, else 404. */
  answer(method: string, path: string, wakeId: string | null): NoOperation {
    const allowed = new Set<string>();
    for (const k of this.known) if (k.re.test(path)) for (const m of k.methods) allowed.add(m);
    if (allowed.size === 0) {
      return {
        status: 404,
        allow: null,
        body: errorBody('resource_missing', wakeId, `no such endpoint: ${method} ${path}`),
      };
    }
    const allow = [...allowed].sort().join(', ');
    return {
      status: 405,
      allow,
      body: errorBody('invalid_request', wakeId, `${method} is not allowed here; use ${allow}`, 'method'),
    };
  }
}
