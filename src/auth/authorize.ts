import { GatewayError } from '../errors.js';
import type { KeyRecord } from './key.js';
import type { KeyRing } from './keyring.js';
import { bearerToken, type EnvClass, secretClass } from './secrets.js';

/**
 * True when the key is revoked at `now`: revoked at all (a revocation is final, whatever
 * the clock says of its stamp: a clock stepped back, or a peer's running ahead, must not
 * bring a leaked key back), or because its scheduled instant has come.
 */
export function isRevoked(k: KeyRecord, now: number): boolean {
  return k.revoked_at !== null || (k.revoke_at !== null && k.revoke_at <= now);
}

/** A revoked key is still identified (`key` set with the error), so its wake names it for leak review. */
export type AuthOutcome = { key: KeyRecord; error: null } | { key: KeyRecord | null; error: GatewayError };

const MISSING = new GatewayError('authentication_required');
const MALFORMED = new GatewayError(
  'authentication_required',
  'the Authorization header must be "Bearer svc_live_..." or "Bearer svc_test_..."',
);
const UNKNOWN = new GatewayError('authentication_required', 'this key is not known');
const REVOKED = new GatewayError('key_revoked');
const UNSTANDING = new GatewayError(
  'authentication_required',
  "this key's environment is no longer configured, or no longer of the key's class (svc_live_ or svc_test_); ask for a new key",
);

/** The class of a configured environment (null: the config has no such environment). */
export type ClassOf = (environment: string) => EnvClass | null;

/**
 * Whether a key still stands under the config in force: its environment is configured and,
 * for a secret, of the class its prefix names. An environment removed from the config, or
 * made live from test (or test from live), takes its keys with it: a svc_test_ key never
 * acts with a live environment's reach, and no key works that the API can no longer name.
 */
export function stands(key: KeyRecord, classOf: ClassOf, token: string | null): boolean {
  const cls = classOf(key.environment);
  return cls !== null && (token === null || secretClass(token) === cls);
}

/**
 * Checks an Authorization header against the key ring. Never throws and never
 * touches storage; the errors are shared constants, so a flood of bad keys
 * allocates little.
 */
export function authenticate(ring: KeyRing, header: string | undefined, now: number, classOf: ClassOf): AuthOutcome {
  if (header === undefined || header === '') return { key: null, error: MISSING };
  const token = bearerToken(header);
  if (token === null) return { key: null, error: MALFORMED };
  const key = ring.bySecret(token);
  if (!key) return { key: null, error: UNKNOWN };
  if (isRevoked(key, ring.revocationTime(now))) return { key, error: REVOKED };
  if (!stands(key, classOf, token)) return { key, error: UNSTANDING };
  return { key, error: null };
}

const NO_CERTIFICATE = new GatewayError(
  'authentication_required',
  "this route needs a client certificate that names a key (the key's tls_fingerprint)",
);

/** The key a verified client certificate names (auth: mtls routes), by its SHA-256 fingerprint ('' for none). */
export function byCertificate(ring: KeyRing, fingerprint: string, now: number, classOf: ClassOf): AuthOutcome {
  const key = fingerprint === '' ? undefined : ring.byCertificate(fingerprint);
  if (!key) return { key: null, error: NO_CERTIFICATE };
  if (isRevoked(key, ring.revocationTime(now))) return { key, error: REVOKED };
  if (!stands(key, classOf, null)) return { key, error: UNSTANDING };
  return { key, error: null };
}

/** Explicit scopes only: no wildcard, no inheritance. */
export function hasScope(key: KeyRecord, scope: string): boolean {
  return key.scopes.includes(scope);
}

export function scopeError(scope: string): GatewayError {
  return new GatewayError('insufficient_scope', `this key lacks the scope ${scope}`);
}
