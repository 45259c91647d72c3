import type { RateLimitPolicy } from '../config/index.js';

export type KeyRateLimit = Pick<RateLimitPolicy, 'limit' | 'burst' | 'window'>;

/** A stored API key. The secret itself is never stored, only its SHA-256. */
export interface KeyRecord {
  id: string;
  environment: string;
  label: string;
  consumer: string;
  scopes: string[];
  rate_limit: KeyRateLimit | null;
  replaces: string | null;
  secret_hash: string;
  created_at: number;
  revoke_at: number | null;
  revoked_at: number | null;
  updated_at: number;
  /** The bootstrap admin key (WAKEGATE_ADMIN_KEY or generated): one is active at a time. */
  bootstrap?: boolean;
  /** The SHA-256 fingerprint (64 lower-case hex) of the client certificate that names this key on auth: mtls routes. */
  tls_fingerprint?: string;
  /**
   * A key made with `replaces`: the id of the first key of its replacement chain, whose
   * rate-limit bucket it spends from (bucketOf). Absent: its own.
   */
  bucket?: string;
}

/**
 * The id of the key whose rate-limit bucket `k` spends from, for every limiter (shared
 * memory, a fleet's Redis): its own, or for a key made with `replaces` the first key of
 * its replacement chain (A, B replacing A and C replacing B all spend from A's). A
 * rotation thus never changes how much a consumer may send, nor hands out a fresh burst,
 * while the old key is usable or after.
 */
export const bucketOf = (k: Pick<KeyRecord, 'id' | 'bucket'>): string => k.bucket ?? k.id;

/** What a key made to replace `old` (null: a key of its own) records of it: its id, and the bucket it spends from. */
export const replacing = (old: KeyRecord | null): Pick<KeyRecord, 'replaces' | 'bucket'> =>
  old === null ? { replaces: null } : { replaces: old.id, bucket: bucketOf(old) };

/** Most characters (code points, after NFC) of a key's label or consumer. */
export const NAME_MAX = 128;

/**
 * Whitespace an origin's trim could drop (Unicode White_Space, and the invisible
 * U+180E, U+200B, U+2060 and U+FEFF that some trims also take): none at either end.
 */
const END_SPACE = /^[\p{White_Space}\u180e\u200b\u2060\ufeff]|[\p{White_Space}\u180e\u200b\u2060\ufeff]$/u;
const CONTROL = /\p{Cc}/u;
/** A lone surrogate (a paired one is one code point under the u flag, never Cs). */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * A key's `label` or `consumer` as it is stored (NFC), or why it is refused: origins
 * trust `x-wakegate-consumer`, so no name may differ from another only by what a
 * reader drops or cannot see (`billing-service ` read as `billing-service`).
 */
export function checkName(value: string): { name: string } | { problem: string } {
  if (LONE_SURROGATE.test(value)) return { problem: 'is not well-formed Unicode (it holds a lone surrogate)' };
  const name = value.normalize('NFC');
  let n = 0;
  for (const _ of name) n++;
  if (n < 1 || n > NAME_MAX) return { problem: `must be 1 to ${NAME_MAX} characters (it has ${n})` };
  const c = CONTROL.exec(name);
  if (c) {
    const hex = (c[0].codePointAt(0) as number).toString(16).toUpperCase().padStart(4, '0');
    return { problem: `must not contain control characters (U+${hex})` };
  }
  if (END_SPACE.test(name)) return { problem: 'must not begin or end with whitespace' };
  return { name };
}

/**
 * A consumer as compared when reserving it: NFKC (so fullwidth `ａｄｍｉｎ` and `ᵃdmin`
 * meet `admin`, as an origin that normalizes for compatibility reads them), case folded
 * (upper then lower, so `ß` meets `SS` and `K` (Kelvin) meets `k`), NFKC again, ends
 * trimmed (names stored before these rules). Two consumers equal here are one identity
 * to an origin that compares loosely.
 */
export function consumerFold(consumer: string): string {
  return consumer
    .normalize('NFKC')
    .toUpperCase()
    .toLowerCase()
    .normalize('NFKC')
    .replace(/^[\p{White_Space}\u180e\u200b\u2060\ufeff]+|[\p{White_Space}\u180e\u200b\u2060\ufeff]+$/gu, '');
}
