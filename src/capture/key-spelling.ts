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
  SPELLED_START.lastIndex = 0;
  for (let m = SPELLED_START.exec(s); m !== null; m = SPELLED_START.exec(s))
    if (spells(s, m.index + (m[0] as string).length - 2, 0)) return true;
  return false;
}
/** A percent-encoding or escape of s, v, c, % or \ (its two hex digits last). */
const SPELLED_START = /(?:%|\\(?:u00|x|U000000))(?:7[36]|63|25|5[cC])/g;

/** Whether the two hex digits at `i` (just decoded) are s, v or c, or % or \ spelling one of them next. */
function spells(s: string, i: number, depth: number): boolean {
  const h = s.slice(i, i + 2).toLowerCase();
  if (h === '73' || h === '76' || h === '63') return true;
  if (depth > ROUNDS) return false;
  const next = i + 2;
  // A decoded `%`: the two characters after it are its hex digits.
  if (h === '25') return /^[0-9A-Fa-f]{2}/.test(s.slice(next, next + 2)) && spells(s, next, depth + 1);
  // A decoded `\`: an escape follows (or the hex of one, percent-encoded once more).
  const rest = s.slice(next, next + 12);
  const esc = /^(?:u00|x|U000000|%(?:75|78)(?:%30%30)?)/.exec(rest);
  if (esc !== null) return spells(s, next + esc[0].length, depth + 1);
  return /^%(?:7[36]|63|25|5[cC])/.test(rest) && spells(s, next + 1, depth + 1);
}

/**
 * Text as an application reads it after up to eight rounds of decoding: percent
 * sequences (as a URL, form or header value is read), then escapes (as JSON or
 * YAML reads a string), and NUL bytes left out (ASCII in UTF-16/32 read as bytes).
 * A character past Latin-1 stands as U+00FF: it ends a key, as it would.
 */
export function decodedForKeys(s: string): string {
  let t = s.indexOf('\0') === -1 ? s : s.replace(NULS, '');
  for (let r = 0; r < ROUNDS; r++) {
    if (t.indexOf('%') === -1 && t.indexOf('\\') === -1) break;
    const next = unescapeAll(percentDecode(t));
    if (next === t) break;
    t = next;
  }
  return t;
}
const NULS = /\0+/g;

function percentDecode(s: string): string {
  if (s.indexOf('%') === -1) return s;
  return s.replace(PERCENT, (_m, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
}
const PERCENT = /%([0-9A-Fa-f]{2})/g;

function unescapeAll(s: string): string {
  if (s.indexOf('\\') === -1) return s;
  return s.replace(ESCAPE, (m, u: string | undefined, x: string | undefined, w: string | undefined) => {
    const hex = u ?? x ?? w;
    if (hex === undefined) return m === '\\\\' ? '\\' : m;
    const c = Number.parseInt(hex, 16);
    return c <= 0xff ? String.fromCharCode(c) : '\u00ff';
  });
}
/** An escape: `\uXXXX`, `\xXX`, `\UXXXXXXXX`, or an escaped backslash (read as one, left as the pair otherwise). */
const ESCAPE = /\\(?:u([0-9A-Fa-f]{4})|x([0-9A-Fa-f]{2})|U([0-9A-Fa-f]{8})|\\)/g;

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
