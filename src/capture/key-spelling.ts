/**
 * A gateway key and the spellings of it an application decodes: `svc_live_` or
 * `svc_test_`, then 32 to 128 base62 characters not followed by another (so
 * `svc_live_paymentsReconciliation` is a word, not a key), written plainly, with any
 * character percent-encoded (`%73vc_…`, `%2573` once more), JSON- or YAML-escaped
 * (`\u0073`, `\x73`, `\U00000073`), or percent-encoded escapes (`%5Cu0073`), nested.
 */

/** A gateway key as an application reads it, its escapes undone. */
export const KEY = /svc_(?:live|test)_[0-9A-Za-z]{32,128}(?![0-9A-Za-z])/;

/**
 * Rounds of decoding followed: an escape inside JSON inside JSON inside a form value
 * (each round stops early once no `%` or `\\` is left).
 */
const ROUNDS = 8;

/**
 * Whether text could spell a key at all: `svc` plainly, or a percent-encoding or an
 * escape of one of its first three letters, or of `%` or `\` followed by one
 * (`%2573`, `%5Cu0073`). A cheap look: most text fails it at once (one regex pass,
 * and a short look at each `%25` or `\u005c` it finds).
 */
export const maySpellKey = (s: string): boolean => spellingStarts(s) || s.indexOf('\0') !== -1;

/** maySpellKey but for NULs (bytes read one a character, where NULs have a look of their own). */
export function spellingStarts(s: string): boolean {
  if (s.indexOf('svc') !== -1) return true;
  if (s.indexOf('%') === -1 && s.indexOf('\\') === -1) return false;
  // A percent-encoding or escape whose hex digits are spelled in turn (`%\u0037\u0033`): looked at whole.
  if (DIGITS_SPELLED.test(s)) return true;
  SPELLED_START.lastIndex = 0;
  for (let m = SPELLED_START.exec(s); m !== null; m = SPELLED_START.exec(s))
    if (spells(s, m.index + (m[0] as string).length - 2, 0)) return true;
  return false;
}
/** A percent-encoding or escape of s, v, c, % or \ (its two hex digits last). */
const SPELLED_START = /(?:%|\\(?:u00|x|U000000))(?:7[36]|63|25|5[cC])/g;
const DIGITS_SPELLED = /(?:%|\\(?:u00|x|U000000))[%\\]/;

/** Whether the two hex digits at `i` (just decoded) are s, v or c, or % or \ spelling one of them next. */
function spells(s: string, i: number, depth: number): boolean {
  const h = s.slice(i, i + 2).toLowerCase();
  if (h === '73' || h === '76' || h === '63') return true;
  if (depth > ROUNDS) return false;
  const next = i + 2;
  // A decoded `%`: the two characters after it are its hex digits.
  if (h === '25')
    return (
      /^[%\\]/.test(s.slice(next)) || (/^[0-9A-Fa-f]{2}/.test(s.slice(next, next + 2)) && spells(s, next, depth + 1))
    );
  // A decoded `\`: an escape follows (or the hex of one, percent-encoded once more).
  const rest = s.slice(next, next + 12);
  const esc = /^(?:u00|x|U000000|%(?:75|78)(?:%30%30)?)/.exec(rest);
  if (esc !== null) return spells(s, next + esc[0].length, depth + 1);
  return /^%(?:7[36]|63|25|5[cC])/.test(rest) && spells(s, next + 1, depth + 1);
}

/**
 * Text as an application reads it after up to eight rounds of decoding: percent
 * sequences (as a URL, form or header value is read) and escapes (as JSON or YAML
 * reads a string), in either order and alternating (JSON in a form value in JSON),
 * and NUL bytes left out (ASCII in UTF-16/32 read as bytes). A character past
 * Latin-1 stands as U+00FF: it ends a key, as it would.
 */
export function decodedForKeys(s: string): string {
  const n = s.length;
  const src = scratch(n, 0);
  let m = 0;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c !== 0) src[m++] = Math.min(c, 0xff);
  }
  return decodeBytes(src, m);
}

/** Bytes `b[from, to)` (one a character, NULs left out) decoded as decodedForKeys does, as Latin-1 text. */
export function decodedSpan(b: Uint8Array, from: number, to: number): string {
  const src = scratch(to - from, 0);
  let m = 0;
  if (b.subarray(from, to).indexOf(0) === -1) {
    src.set(b.subarray(from, to));
    m = to - from;
  } else {
    for (let i = from; i < to; i++) {
      const c = b[i] as number;
      if (c !== 0) src[m++] = c;
    }
  }
  decodeWork.bytes += to - from;
  return decodeBytes(src, m);
}

/**
 * Bytes run through the decoder's passes (each pass counts the bytes it reads), for
 * tests that bound the work a body costs per byte.
 */
export const decodeWork = { bytes: 0 };

/** Two buffers the passes read from and write to in turn (grown, never shrunk). */
const bufs: [Uint8Array, Uint8Array] = [new Uint8Array(1 << 16), new Uint8Array(1 << 16)];
function scratch(n: number, k: 0 | 1): Uint8Array {
  if (bufs[k].length < n) bufs[k] = new Uint8Array(Math.max(n, 2 * bufs[k].length));
  return bufs[k];
}

/** The first `n` bytes of the first scratch buffer decoded: passes alternate until one changes nothing. */
function decodeBytes(first: Uint8Array, n: number): string {
  let src = first;
  let dst = scratch(n, 1);
  let len = n;
  let idle = 0;
  // Escapes first, then percent, then escapes…: each pass undoes one layer, so the
  // nesting in either order is read; two passes that change nothing end it.
  let work = 0;
  for (let p = 0; p < 2 * ROUNDS + 1 && idle < 2; p++) {
    const escapes = p % 2 === 0;
    // A pass with nothing to undo is skipped (a native look for its `\\` or `%`).
    if (src.subarray(0, len).indexOf(escapes ? 0x5c : 0x25) === -1) {
      idle++;
      continue;
    }
    work += len;
    const out = escapes ? escapePass(src, len, dst) : percentPass(src, len, dst);
    idle = out === len ? idle + 1 : 0;
    len = out;
    const t = src;
    src = dst;
    dst = t;
  }
  decodeWork.bytes += work;
  return Buffer.from(src.buffer, src.byteOffset, len).toString('latin1');
}

/** Value of each byte as a hex digit, or -1. */
const HEX = new Int8Array(256).fill(-1);
for (let c = 0; c < 16; c++) {
  HEX[c.toString(16).charCodeAt(0)] = c;
  HEX[c.toString(16).toUpperCase().charCodeAt(0)] = c;
}

/** Value of `k` hex digits at `i` (below `n`), or -1. */
function hexAt(s: Uint8Array, i: number, k: number, n: number): number {
  if (i + k > n) return -1;
  let v = 0;
  for (let j = i; j < i + k; j++) {
    const h = HEX[s[j] as number] as number;
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

/** `%XX` sequences decoded (as a URL, form or header value is read); the length written. */
function percentPass(s: Uint8Array, n: number, d: Uint8Array): number {
  let o = 0;
  for (let i = 0; i < n; i++) {
    const c = s[i] as number;
    if (c === 0x25 && i + 2 < n) {
      const h = HEX[s[i + 1] as number] as number;
      const l = HEX[s[i + 2] as number] as number;
      if ((h | l) >= 0) {
        d[o++] = h * 16 + l;
        i += 2;
        continue;
      }
    }
    d[o++] = c;
  }
  return o;
}

/** `\uXXXX`, `\xXX`, `\UXXXXXXXX` and `\\` undone (as JSON or YAML reads a string); the length written. */
function escapePass(s: Uint8Array, n: number, d: Uint8Array): number {
  let o = 0;
  for (let i = 0; i < n; i++) {
    const c = s[i] as number;
    if (c === 0x5c) {
      const e = s[i + 1];
      const k = e === 0x75 ? 4 : e === 0x78 ? 2 : e === 0x55 ? 8 : 0;
      const v = k === 0 ? -1 : hexAt(s, i + 2, k, n);
      if (v >= 0) {
        d[o++] = Math.min(v, 0xff);
        i += 1 + k;
        continue;
      }
      if (e === 0x5c && i + 1 < n) {
        d[o++] = 0x5c;
        i += 1;
        continue;
      }
    }
    d[o++] = c;
  }
  return o;
}

/** Whether text holds a gateway key in any of these spellings. */
export const spellsKey = (s: string): boolean => maySpellKey(s) && KEY.test(decodedForKeys(s));

/**
 * Whether decoded text holds a key; `more`: text follows that is not here yet, so a
 * key-like run reaching the end is left for the next look (which sees it whole).
 */
export const keyIn = (decoded: string, more: boolean): boolean => (more ? KEY_BEFORE_END : KEY).test(decoded);
const KEY_BEFORE_END = /svc_(?:live|test)_[0-9A-Za-z]{32,128}(?=[^0-9A-Za-z])/;

/** One character of a key in the spellings replaced in place: plain, `%XX`, `%25XX`, `\u00XX`, `\xXX`, `%5Cu00XX`. */
function spelled(plain: string, hex: string): string {
  return `(?:${plain}|%(?:25)?${hex}|(?:\\\\|%5[cC])(?:u00|x)${hex})`;
}
const hexOf = (c: string): string =>
  c
    .charCodeAt(0)
    .toString(16)
    .replace(/[a-f]/g, (h) => `[${h}${h.toUpperCase()}]`);
const letter = (c: string): string => spelled(c, hexOf(c));
const word = (w: string): string => [...w].map(letter).join('');
const BASE62 = spelled('[0-9A-Za-z]', '(?:3[0-9]|4[1-9A-Fa-f]|5[0-9Aa]|6[1-9A-Fa-f]|7[0-9Aa])');

/**
 * A key in the spellings that can be replaced where they stand (one layer of
 * encoding per character, any mix). Deeper nestings are found by `spellsKey` and
 * replaced with the whole value that holds them.
 */
export const spelledKeyIn = (flags: string): RegExp =>
  new RegExp(`${word('svc_')}(?:${word('live')}|${word('test')})${letter('_')}${BASE62}{32,128}(?!${BASE62})`, flags);

const EVERY_SPELLED = spelledKeyIn('g');

/** The start of a key at the very end of text cut short (a body past max_body_bytes), down to `svc_live_`. */
const CUT_KEY = new RegExp(
  `${word('svc_')}(?:${word('live')}|${word('test')})${letter('_')}${BASE62}{0,128}(?:(?:%|\\\\)[0-9A-Za-z]{0,7})?$`,
);

/** Text cut short with the start of a key at its end replaced by `replace(start)`. */
export function replaceCutKey(s: string, replace: (k: string) => string): string {
  if (!maySpellKey(s)) return s;
  return s.replace(CUT_KEY, replace);
}

/**
 * Text with each key replaced by `replace(key as spelled)`; when a key remains in a
 * spelling that cannot be cut out (nested deeper), `whole(text)` stands for all of it.
 */
export function replaceKeys(s: string, replace: (k: string) => string, whole: (s: string) => string): string {
  if (!maySpellKey(s)) return s;
  const out = s.replace(EVERY_SPELLED, replace);
  return spellsKey(out) ? whole(s) : out;
}
