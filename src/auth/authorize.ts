import { GatewayError } from '../errors.js';
import type { KeyRecord } from './key.js';
import type { KeyRing } from './keyring.js';
import { bearerToken } from './secrets.js';

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

/**
 * Checks an Authorization header against the key ring. Never throws and never
 * touches storage; the errors are shared constants, so a flood of bad keys
 * allocates little.
 */
export function authenticate(ring: KeyRing, header: string | undefined, now: number): AuthOutcome {
  if (header === undefined || header === '') return { key: null, error: MISSING };
  const token = bearerToken(header);
  if (token === null) return { key: null, error: MALFORMED };
  const key = ring.bySecret(token);
  if (!key) return { key: null, error: UNKNOWN };
  if (isRevoked(key, ring.revocationTime(now))) return { key, error: REVOKED };
  return { key, error: null };
}

const NO_CERTIFICATE = new GatewayError(
  'authentication_required',
  "this route needs a client certificate that names a key (the key's tls_fingerprint)",
);

/** The key a verified client certificate names (auth: mtls routes), by its SHA-256 fingerprint ('' for none). */
export function byCertificate(ring: KeyRing, fingerprint: string, now: number): AuthOutcome {
  const key = fingerprint === '' ? undefined : ring.byCertificate(fingerprint);
  if (!key) return { key: null, error: NO_CERTIFICATE };
  if (isRevoked(key, ring.revocationTime(now))) return { key, error: REVOKED };
  return { key, error: null };
}

/** Explicit scopes only: no wildcard, no inheritance. */
export function hasScope(key: KeyRecord, scope: string): boolean {
  return key.scopes.includes(scope);
}

export function scopeError(scope: string): GatewayError {
  return new GatewayError('insufficient_scope', `this key lacks the scope ${scope}`);
}
