/** Text helpers of the redactor: gateway keys in any spelling, JSON escapes, encodings, formats it cannot read. */
import { replaceKeys, spelledKeyIn, spellsKey } from './key-spelling.js';

/**
 * A gateway key (svc_live_ / svc_test_ and 32 to 128 base62 characters) in the
 * spellings that can be replaced where they stand: any of its characters
 * percent-encoded (`%73vc_…`, `svc%5Flive%5F…`) or escaped (`\u0073vc_…`). See key-spelling.ts.
 */
export const gatewayKeyIn = spelledKeyIn;

/** A form or query name or value as a server decodes it (`+` a space); left as sent when not valid. */
export function formDecode(s: string): string {
  if (s.indexOf('%') === -1 && s.indexOf('+') === -1) return s;
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
}

/** Whether text holds a gateway key in any spelling an application decodes (nested percent-encodings and escapes). */
export const holdsGatewayKey = spellsKey;

/** What stands for a gateway key in a wake's summary (path, user agent, consumer) and the access log. */
export const KEY_REPLACED = '[redacted:gateway-key]';

/**
 * Text with every gateway key replaced (the same string when it holds none: a cheap
 * look first); text holding one in a spelling that cannot be cut out is replaced whole.
 */
export const withoutGatewayKeys = (s: string): string => replaceKeys(s, replaced, replaced);
const replaced = (): string => KEY_REPLACED;

/**
 * Why the redactor cannot read a body, or null when it can: XML, GraphQL documents,
 * one long base64 token, bytes that are not UTF-8. Such a body is kept as its size and
 * SHA-256 unless the route says `capture.detail.opaque_bodies: keep`.
 */
export function opaqueReason(bytes: Buffer, ct: string, utf8: boolean): string | null {
  if (!utf8) return 'a binary body (not UTF-8 text); opaque_bodies: keep keeps it';
  if (ct.includes('xml')) return 'an XML body; opaque_bodies: keep keeps it';
  if (ct.includes('graphql')) return 'a GraphQL document; opaque_bodies: keep keeps it';
  if (bytes.length >= 64 && !ct.includes('json') && BASE64.test(bytes.toString('latin1')))
    return 'a base64 body; opaque_bodies: keep keeps it';
  return null;
}
const BASE64 = /^\s*[A-Za-z0-9+/_-]{64,}={0,2}\s*$/;

const UNESCAPES: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
/**
 * A JSON string's text as JSON reads it, its escapes undone; lenient, so a string
 * cut short (or not quite valid) is read as far as it can be: an escape cut off at
 * the end is dropped, and an unknown one stands for its character.
 */
export function jsonUnescape(raw: string): string {
  if (raw.indexOf('\\') === -1) return raw;
  return raw.replace(
    /\\(?:u([0-9a-fA-F]{4})|u[0-9a-fA-F]{0,3}$|(.)|$)/g,
    (_m, hex: string | undefined, c: string | undefined) =>
      hex !== undefined ? String.fromCharCode(Number.parseInt(hex, 16)) : c === undefined ? '' : (UNESCAPES[c] ?? c),
  );
}

/** JSON's one-letter escapes, by the character they stand for (as a regex character class holds them). */
const SHORT_ESCAPES: Record<string, string> = {
  '"': '"',
  '\\': '\\\\',
  '/': '/',
  '\b': 'b',
  '\f': 'f',
  '\n': 'n',
  '\r': 'r',
  '\t': 't',
};

/**
 * A pattern of the JSON escapes that stand for a character of some field name:
 * `\uXXXX` of each (hex digits in either case) and the one-letter escapes. Escapes
 * of other characters (non-ASCII text, a Go encoder's `\u003c`) do not match.
 */
export function nameEscapes(fields: readonly string[]): string {
  const codes = new Set<string>();
  const short = new Set<string>();
  for (const f of fields)
    for (let i = 0; i < f.length; i++) {
      const c = f.charAt(i);
      codes.add(
        f
          .charCodeAt(i)
          .toString(16)
          .padStart(4, '0')
          .replace(/[a-f]/g, (h) => `[${h}${h.toUpperCase()}]`),
      );
      const e = SHORT_ESCAPES[c];
      if (e !== undefined) short.add(e);
    }
  const alts = [`u(?:${[...codes].join('|')})`];
  if (short.size > 0) alts.push(`[${[...short].join('')}]`);
  return `\\\\(?:${alts.join('|')})`;
}

/** Drops an incomplete UTF-8 sequence at the end of a body cut short. */
export function trimPartialUtf8(buf: Buffer): Buffer {
  let end = buf.length;
  for (let i = 1; i <= 3 && end - i >= 0; i++) {
    const b = buf[end - i] as number;
    if ((b & 0xc0) === 0x80) continue;
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    if (need > i) end -= i;
    break;
  }
  return buf.subarray(0, end);
}

/** A gateway key in the spellings replaced in place (kept for callers that test with it). */
export const GATEWAY_KEY_START = spelledKeyIn('');
