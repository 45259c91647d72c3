import type { KeyRecord } from '../auth/key.js';

/** Where a request entered: the proxy (plain or an upgrade), the /v2 API, or a replay of a wake. */
export type EntryKind = 'proxy' | 'api' | 'replay';

/**
 * What the route a request matched asks of it: who may send it, the scope it needs,
 * the rate-limit policy it draws from besides its key's bucket, and where it may go.
 * A proxied route is one (routes.ts); so is each /v2 operation (its `auth` config).
 */
export interface Gate {
  readonly name: string;
  /** required: a live key; optional: checked when one is sent; none: never read; mtls: the client certificate's key. */
  readonly auth: 'required' | 'optional' | 'none' | 'mtls';
  /** The scope a key needs: `read` for GET, HEAD and OPTIONS, `write` otherwise; null for none. */
  readonly scopes: { readonly read: string; readonly write: string } | null;
  /** A policy drawn from as well as the key's bucket (null: the key's bucket only). */
  readonly policy: string | null;
  /** Origins by environment; null for an operation the gateway answers itself (/v2). */
  readonly origins: ReadonlyMap<string, unknown> | null;
  /** The environment of a request no key places (null: left as the entry set it). */
  readonly defaultEnvironment: string | null;
  /**
   * True for a /v2 operation that charges the key once, in an admission of its own (a
   * replay, charged as the request it sends): this one takes no token.
   */
  readonly uncharged?: boolean;
}

/** The gate of a /v2 operation: a live key holding `scope` ('' for any key), drawing from `policy` too. */
export function apiGate(scope: string, policy: string | null, uncharged = false): Gate {
  return {
    name: 'v2',
    auth: 'required',
    scopes: scope === '' ? null : { read: scope, write: scope },
    policy,
    origins: null,
    defaultEnvironment: null,
    ...(uncharged ? { uncharged: true } : {}),
  };
}

/**
 * One request as its entry point read it, once: the URL split into path and query
 * here and nowhere again (nginx's `r->uri` and `r->args`). Every field is always
 * present, so every request has one shape.
 */
export interface Ask {
  kind: EntryKind;
  /** The request line's method (a replay's: its wake's), as recorded. */
  method: string;
  /**
   * A method override header (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override)
   * names a method that is not a read: the origin may run a write, so the write scope
   * is needed whatever `method` is (override.ts).
   */
  overridesToWrite: boolean;
  /** The request target as sent (a proxied request's, for the key-in-URL look); '' otherwise. */
  url: string;
  /** The raw (undecoded) path, without the query. */
  path: string;
  /** The query with its `?`, or ''. */
  query: string;
  /** The Authorization header (proxy and /v2). */
  authorization: string | undefined;
  /** The SHA-256 of the connection's verified client certificate ('' for none): the key of an auth: mtls route. */
  fingerprint: string;
  /** x-consumer-id, the consumer of a request no key names (proxy). */
  consumer: string | undefined;
  /** The client's address ('' for a replay: it is charged to its caller's key alone). */
  ip: string;
  now: number;
  /** A /v2 call: the operation its router matched. */
  gate: Gate | null;
  /** A replay: the id of the key that sent the wake ('' for none); the replay is sent as that key. */
  keyId: string;
  /** A replay: the key asking for it (admitted by its own /v2 call), charged and scope-checked. */
  caller: KeyRecord | null;
  /** A proxied request whose Via names this gateway: it came round (via.ts), refused once its route is known. */
  looped: boolean;
  /** A replay: the wake's environment, which chooses the origin. */
  environment: string;
}

/**
 * The gate of a /v2 operation open to anyone (`GET /v2/openapi.json`): no key read, the
 * call drawn from its client address's bucket (`default`) as a keyless request is, so one
 * address cannot have the document served without end.
 */
export const OPEN_CALL: Gate = {
  name: 'v2',
  auth: 'none',
  scopes: null,
  policy: null,
  origins: null,
  defaultEnvironment: null,
};
