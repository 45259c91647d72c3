import { scopeError } from '../auth/authorize.js';
import { GatewayError } from '../errors.js';
import type { Ask } from './gate.js';

/**
 * Why a request is refused, with every header the refusal carries beyond the entry
 * point's own (content type and length, x-wake-id): WWW-Authenticate on a 401, the
 * rate-limit headers and Retry-After on a 429, Retry-After on a 503.
 */
export interface Refusal {
  readonly error: GatewayError;
  readonly headers: readonly string[];
}

export const NONE: readonly string[] = [];
/** RFC 6750 §3: a 401 names the scheme it wants. */
const WWW_AUTHENTICATE: readonly string[] = ['www-authenticate', 'Bearer'];

export const refusal = (error: GatewayError, headers: readonly string[] = NONE): Refusal => ({ error, headers });

/**
 * A key refused (missing, malformed, unknown, revoked): a 401 that names its scheme,
 * with the headers of the per-address bucket it drew from (`limit`, when one did).
 */
export const keyRefusal = (error: GatewayError, limit: readonly string[] | null = null): Refusal => {
  const scheme = error.status === 401 ? WWW_AUTHENTICATE : NONE;
  return refusal(error, limit === null || limit.length === 0 ? scheme : [...scheme, ...limit]);
};

/** The refusal of a request with a gateway key in its URL (the management listener gives it too). */
export const KEY_IN_URL = new GatewayError(
  'invalid_request',
  'a gateway key was sent in the URL; send it in the Authorization header only, and revoke this one: URLs are logged along the way',
  'url',
);

/** The fleet's Redis does not answer and coordination.on_unavailable is closed. */
export const UNAVAILABLE = new GatewayError(
  'service_unavailable',
  'rate limits cannot be checked: the coordination server does not answer (coordination.on_unavailable: closed)',
  null,
  1,
);

const NO_ROUTE = new GatewayError('resource_missing', 'no route matches this path');

/*
 * The refusals whose words depend on the entry. A replay's request is a stored wake,
 * not the caller's: what a proxied request is refused with 404 (no route, no origin)
 * makes the wake one that cannot be replayed (409, naming wake_id).
 */

export function noRoute(a: Ask): GatewayError {
  if (a.kind !== 'replay') return NO_ROUTE;
  return new GatewayError(
    'conflict',
    `no route of the current configuration matches ${JSON.stringify(a.path)}, so it cannot be replayed`,
    'wake_id',
  );
}

export function noOrigin(a: Ask, route: string, environment: string): GatewayError {
  if (a.kind !== 'replay') {
    return new GatewayError('resource_missing', `route ${route} has no origin for environment ${environment}`);
  }
  return new GatewayError(
    'conflict',
    `route ${JSON.stringify(route)}, which matches this path now, has no origin for ${environment}`,
    'wake_id',
  );
}

/** The key that must hold `scope` does not (a replay's caller: the route and method are named). */
export function lacksScope(a: Ask, scope: string, route: string): GatewayError {
  if (a.kind !== 'replay') return scopeError(scope);
  return new GatewayError(
    'insufficient_scope',
    `this key lacks the scope ${scope}, which the replayed ${a.method}${a.overridesToWrite ? ' (with a method override header naming a write)' : ''} on route ${route} needs`,
  );
}

/*
 * A replay is sent as the wake's key (its identity headers), or as none: that key
 * must be able to send it today.
 */

export const senderRevoked = (keyId: string): GatewayError =>
  new GatewayError(
    'conflict',
    `the key that sent this wake (${keyId}) has been revoked, so it cannot be replayed as that key`,
    'wake_id',
  );

export const senderLacksScope = (keyId: string, scope: string, route: string): GatewayError =>
  new GatewayError(
    'conflict',
    `the key that sent this wake (${keyId}) lacks the scope ${scope}, which route ${route} needs for it now; a replay is sent as that key, so it cannot be replayed`,
    'wake_id',
  );

/** A wake sent without a key, under a route that now requires one: it would reach the origin unidentified. */
export const senderMissing = (route: string): GatewayError =>
  new GatewayError(
    'conflict',
    `this wake was sent without a key, and route ${route}, which matches its path now, requires one; it cannot be replayed`,
    'wake_id',
  );
