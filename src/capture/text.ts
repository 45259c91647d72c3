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

/**
 * The credentials of an HTTP Basic Authorization value (`Basic <base64 of user:password>`,
 * RFC 7617) as the origin decodes them, or null for any other value. Base64 hides a key
 * sent that way (`curl -u svc_live_…:`) from a scan of the value itself.
 */
export function basicCredentials(value: string): string | null {
  if (value.length < 7 || (value.charCodeAt(0) | 0x20) !== 0x62 || value.slice(0, 6).toLowerCase() !== 'basic ')
    return null;
  return Buffer.from(value.slice(6).trim(), 'base64').toString('latin1');
}

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

/**
 * What `editJson` asks at each value of a JSON document: the redactor replaces named
 * members and strings holding documents; a replay fills markers (replay/fill.ts).
 */
export interface JsonEditor {
  /** Whether a member's value is replaced whole, whatever its type (not read inside): by its key as JSON reads it. */
  whole(key: string): boolean;
  /** What replaces a value replaced whole, given its text as sent (and its path when paths are asked for). */
  replace(raw: string, path: string): string;
  /** What replaces a string value, given its text between the quotes as sent; undefined keeps it. */
  string(raw: string, path: string, depth: number): string | undefined;
  /** A member's key as JSON reads it, with the path of its object. */
  key?(key: string, path: string): void;
  /** An object or array entered at `depth` (it may stop the walk by throwing). */
  enter?(depth: number): void;
}

/**
 * A JSON document with values replaced where they stand: every other byte (numbers
 * past 2^53, spacing, key order, duplicate keys, escapes) kept as written. `text`
 * must be a document JSON.parse accepts (the walk relies on it). `paths`: give each
 * value its JSON path (`$.card.cvc`, `$.items[0]`, `$["a b"]`), else ''.
 */
export function editJson(text: string, e: JsonEditor, paths = false, depth0 = 0): string {
  let i = 0;
  let last = 0;
  let out = '';
  const space = (): void => {
    for (let c = text.charCodeAt(i); c === 32 || c === 10 || c === 13 || c === 9; c = text.charCodeAt(++i));
  };
  const edit = (start: number, t: string): void => {
    out += text.slice(last, start) + t;
    last = i;
  };
  const value = (path: string, depth: number): void => {
    space();
    const c = text.charCodeAt(i);
    if (c === 34) {
      const s = i;
      i = stringEnd(text, i);
      const t = e.string(text.slice(s + 1, i - 1), path, depth);
      if (t !== undefined) edit(s, t);
      return;
    }
    if (c !== 123 && c !== 91) {
      i = valueEnd(text, i);
      return;
    }
    e.enter?.(depth);
    const object = c === 123;
    i++;
    space();
    if (text.charCodeAt(i) === (object ? 125 : 93)) {
      i++;
      return;
    }
    for (let n = 0; ; n++) {
      if (object) {
        space();
        const k = i;
        i = stringEnd(text, i);
        const key = stringText(text.slice(k + 1, i - 1));
        space();
        i++; // ':'
        const p = paths ? jsonPath(path, key) : '';
        e.key?.(key, path);
        if (e.whole(key)) {
          space();
          const s = i;
          i = valueEnd(text, i);
          edit(s, e.replace(text.slice(s, i), p));
        } else value(p, depth + 1);
      } else value(paths ? `${path}[${n}]` : '', depth + 1);
      space();
      // A ',' goes on; the close ends it.
      if (text.charCodeAt(i++) !== 44) return;
    }
  };
  value('$', depth0);
  return last === 0 && out === '' ? text : out + text.slice(last);
}

/** The text of a string of a valid JSON document (between its quotes, as written), its escapes undone. */
export const stringText = (raw: string): string =>
  raw.indexOf('\\') === -1 ? raw : (JSON.parse(`"${raw}"`) as string);

/** The JSON path of member `key` of the value at `base`. */
export const jsonPath = (base: string, key: string): string =>
  /^[A-Za-z_$][\w$]*$/.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`;

/** Where the JSON string opened by the quote at `i` ends (past its closing quote), or the end of text cut short. */
function stringEnd(t: string, i: number): number {
  for (let j = i + 1; ; ) {
    const q = t.indexOf('"', j);
    if (q === -1) return t.length;
    let b = q - 1;
    while (t.charCodeAt(b) === 92) b--;
    if ((q - 1 - b) % 2 === 0) return q + 1;
    j = q + 1;
  }
}

/**
 * Where the JSON value starting at `i` ends: a string past its quote, an object or
 * array past its matching bracket (strings inside skipped), a number or word at the
 * next delimiter; text cut short inside it ends at the cut.
 */
export function valueEnd(t: string, i: number): number {
  const c = t.charCodeAt(i);
  if (c === 34) return stringEnd(t, i);
  if (c !== 123 && c !== 91) {
    for (let x = t.charCodeAt(i); i < t.length && !LITERAL_ENDS.has(x); x = t.charCodeAt(++i));
    return i;
  }
  let depth = 0;
  for (; i < t.length; i++) {
    const x = t.charCodeAt(i);
    if (x === 34) i = stringEnd(t, i) - 1;
    else if (x === 123 || x === 91) depth++;
    else if ((x === 125 || x === 93) && --depth === 0) return i + 1;
  }
  return t.length;
}
/** `,` `]` `}` and JSON's whitespace. */
const LITERAL_ENDS = new Set([44, 93, 125, 32, 10, 13, 9]);
