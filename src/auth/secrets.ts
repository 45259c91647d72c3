import { hash, randomBytes } from 'node:crypto';
import { newSecret } from '../ids.js';

export type EnvClass = 'live' | 'test';

/** svc_live_ / svc_test_ followed by 43 base62 characters (256 bits). */
const KEY_SECRET = /^svc_(live|test)_[0-9A-Za-z]{43}$/;
/** Bootstrap keys given by operators may be longer; never shorter than 32. */
const ANY_KEY_SECRET = /^svc_(live|test)_[0-9A-Za-z]{32,128}$/;

/** A new key secret of class `cls`; anything but live or test is a bug, thrown (never `svc_null_...`). */
export function newKeySecret(cls: EnvClass): string {
  if (cls !== 'live' && cls !== 'test') throw new Error(`no key secret of class ${JSON.stringify(cls)}`);
  return `svc_${cls}_${newSecret()}`;
}
/** Standard Webhooks form: `whsec_` + base64 of 32 random bytes. */
export const newSigningSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

/** Only this hash of a key secret is ever stored. */
export const hashSecret = (secret: string): string => hash('sha256', secret, 'hex');

export const isKeySecret = (s: string): boolean => s.length <= 140 && ANY_KEY_SECRET.test(s);
export const isGeneratedKeySecret = (s: string): boolean => KEY_SECRET.test(s);
export const secretClass = (s: string): EnvClass | null =>
  s.startsWith('svc_live_') ? 'live' : s.startsWith('svc_test_') ? 'test' : null;

/**
 * Extracts the token of an `Authorization: Bearer <token>` header. The scheme is
 * case-insensitive (RFC 9110 §11.1); one or more spaces may follow it. Returns
 * null for anything else: no header, another scheme, no token, or a token that is
 * not a key secret in form.
 */
export function bearerToken(header: string | undefined): string | null {
  if (header === undefined || header.length > 200 || header.length < 8) return null;
  if (header.slice(0, 6).toLowerCase() !== 'bearer' || header.charCodeAt(6) !== 32) return null;
  const token = header.slice(7).trim();
  return isKeySecret(token) ? token : null;
}
