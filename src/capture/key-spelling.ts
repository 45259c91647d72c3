/**
 * A gateway key and the spellings of it an application decodes: `svc_live_` or
 * `svc_test_`, then 32 to 128 base62 characters not followed by another (so
 * `svc_live_paymentsReconciliation` is a word, not a key), written plainly, with any
 * character percent-encoded (`%73vc_…`, `%2573` once more), JSON- or YAML-escaped
 * (`\u0073`, `\x73`, `\U00000073`), or written as an XML/HTML character reference
 * (`&#115;`, `&#x73;`, `&#X73;`, leading zeros any number: `&#0115;`, `&#x0073;`),
 * nested in any order (`%5Cu0073`, `&amp;#115;`, `%26%23115%3B`, `&#37;73`), up to
 * eight rounds of each.
 *
 * References are read as HTML reads them, the widest of the readings: the `;` may be
 * left out (`&#115vc_…`: HTML's legacy parsing), the digits going on as far as they
 * go (`&#1151` is not `s`); a value past U+00FF stands as U+00FF (it ends a key, as the
 * character would); `&amp;` is `&` in either case and without its `;`, and the named
 * references that spell a key's characters or an escape's are read too: `&lowbar;`
 * and `&UnderBar;` (`_`), `&percnt;`, `&bsol;`, `&num;`, `&fjlig;` (`fj`). Where a
 * reference without its `;` stands before an escape of a digit (`&#x61%31`), its
 * extent depends on which is read first: both readings are made.
 *
 * A key is a key in any reading: the text as sent, or with any of its layers undone,
 * in any order. A key followed by escapes of base62 characters that make it longer
 * than 128 once decoded (`KEY%41…`, `KEY&#65;…`) is one: a reader that does not decode
 * them reads the key. A word spelled alike throughout (each layer an encoder wraps
 * around all of it) is no key in any reading, however long.
 */

/** A gateway key as an application reads it, its escapes undone. */
export const KEY = /svc_(?:live|test)_[0-9A-Za-z]{32,128}(?![0-9A-Za-z])/;

/**
 * Rounds of decoding followed: an escape inside JSON inside JSON inside a form value
 * (each kind of escape, percent-encoding, and references, undone up to eight times;
 * decoding stops early once a round changes nothing).
 */
const ROUNDS = 8;

/**
 * Whether text could spell a key at all: `svc` plainly, or a `%`, `\` or `&` that may
 * start a spelling of one of its first three letters (spellsStart). A cheap look: most
 * text fails it at once (a native search for each of the three, and a short look at
 * each one found).
 */
export const maySpellKey = (s: string): boolean => spellingStarts(s) || s.indexOf('\0') !== -1;

/** maySpellKey but for NULs (bytes read one a character, where NULs have a look of their own). */
export function spellingStarts(s: string): boolean {
  if (s.indexOf('svc') !== -1) return true;
  for (const c of LAYERS)
    for (let i = s.indexOf(c); i !== -1; i = s.indexOf(c, i + 1)) if (spellsStart(s, i)) return true;
  return false;
}
const LAYERS = ['%', '\\', '&'];

/** Text as a string or bytes (one a character). */
type Text = string | Uint8Array;
const PCT = 0x25;
const BSL = 0x5c;
const AMP = 0x26;
const HASH = 0x23;
const SEMI = 0x3b;
/** Past the end of the text. */
const END = -1;
const at = (s: Text, i: number, n = s.length): number =>
  i >= n ? END : typeof s === 'string' ? s.charCodeAt(i) : (s[i] as number);
const isLayer = (c: number): boolean => c === PCT || c === BSL || c === AMP;
const hexValue = (c: number): number => (c >= 0 && c < 256 ? (HEX[c] as number) : -1);
/**
 * Escapes the look follows one inside another, past which it answers true (the place
 * is read whole): more than any text but a spelling nests, and a run of `%%%…` or
 * `&&&…` costs a few steps a byte.
 */
const LOOK_DEPTH = 6;
/** Digits of a reference past which the look reads the place whole (`&#0000…`: zeros go on as long as they like). */
const LONG_DIGITS = 32;

/** A set of characters, as a table by code. */
function charSet(chars: string): Uint8Array {
  const t = new Uint8Array(256);
  for (let i = 0; i < chars.length; i++) t[chars.charCodeAt(i)] = 1;
  return t;
}
const inSet = (t: Uint8Array, c: number): boolean => c >= 0 && c < 256 && t[c] === 1;
/** A key's first letters. */
const SVC_SET = charSet('svc');
/**
 * What the characters of an escape are: hex digits; the letter after `\` (or a second
 * `\`: `\\`, read as `\`); after `&`; a reference's digits.
 */
const HEX_SET = charSet('0123456789abcdefABCDEF');
const DEC_SET = charSet('0123456789');
const ESCAPE_SET = charSet('uxU\\');
const AMP_SET = charSet('#aApbnlUf');
const REF_SET = charSet('0123456789abcdefABCDEFxX');
/** The `;` that may end a reference. */
const SEMI_SET = charSet(';');

/**
 * Whether the `%`, `\` or `&` at `i` may start a spelling of s, v or c (a key's first
 * letters), in any nesting: each escape's value followed (a `%`, `\` or `&` decoded
 * goes on to read what follows it: `%2573`, `\u005Cu0073`, `&amp;#115;`, `&#37;73`),
 * and where an escape's own characters are spelled in turn (`%\u0037\u0033`,
 * `\%750073`, `&#\u0031…`, `&%23…`), or the `;` that may end a reference, or the
 * second `\` of `\\`, through any nesting (`&amp%253B`, `&#37;26amp&#37;3B`,
 * `\%5Cx73`), true when they may spell what they stand for (such a place is read
 * whole). Where the text ends within it: `cut`, whether the text is a short part of
 * what follows (else what is cut off there is read with the rest).
 */
export function spellsStart(s: Text, i: number, cut = false): boolean {
  // Most escapes in text are plain ones of other characters (`\u00e9`, `%20`, `&#233;`, `&amp; `): told
  // at once, in bytes (the body scan's many) first.
  if (typeof s !== 'string' && i + 5 < s.length && plainlyNot(s, i)) return false;
  cutAnswer = cut;
  const v = plainEscape(s, i);
  if (v >= 0) {
    // An escape of s, v or c; or of `%`, `\\` or `&` that what follows may make an escape.
    if (inSet(SVC_SET, v)) return true;
    if (!isLayer(v)) return false;
    const n = at(s, escapeEnd);
    if (n === END) return cut;
    if (!inSet(v === PCT ? AFTER_PCT : v === BSL ? AFTER_BSL : AFTER_AMP, n)) return false;
  } else if (v === NONE) return false;
  steps = 0;
  return escapeTo(s, i, SVC_SET, 0);
}
/** A key's first letters, and what goes on to spell one: `%`, `\`, `&`. */
const WATCHED = charSet('svc%\\&');
/**
 * `%XX` and `\u00XX` of a character not WATCHED, and `\` or `&` followed by what
 * starts no escape, in bytes (`i + 5` within them): no start, told at once.
 */
function plainlyNot(b: Uint8Array, i: number): boolean {
  const c = b[i] as number;
  const e = b[i + 1] as number;
  if (c === PCT) {
    const h = HEX[e] as number;
    const l = HEX[b[i + 2] as number] as number;
    return (h | l) >= 0 && WATCHED[h * 16 + l] === 0;
  }
  if (c === BSL) {
    if (e !== 0x75) return AFTER_BSL[e] === 0;
    if (b[i + 2] !== 0x30 || b[i + 3] !== 0x30) return false;
    const h = HEX[b[i + 4] as number] as number;
    const l = HEX[b[i + 5] as number] as number;
    return (h | l) >= 0 && WATCHED[h * 16 + l] === 0;
  }
  // After `&`: `#` and a digit or `x`, the first two letters of a name (NAMED, `amp`), or a `%`, `\` or `&`.
  const f = b[i + 2] as number;
  if (isLayer(e) || isLayer(f)) return false;
  if (AFTER_AMP[e] === 0) return true;
  return e === HASH
    ? REF_SET[f] === 0
    : (e | 0x20) === 0x61
      ? (f | 0x20) !== 0x6d
      : NAMED_BY_START[e]?.[0].charCodeAt(1) !== f;
}
/** What may follow a `%`, `\` or `&` for it to start an escape (hex digits, the letter, `#` or a name; or one spelled). */
const AFTER_PCT = charSet('0123456789abcdefABCDEF%\\&');
const AFTER_BSL = charSet('uxU%\\&');
const AFTER_AMP = charSet('#aApbnlUf%\\&');
/** plainEscape's answers: no escape starts here; or one whose characters are spelled (or cut short): the look reads it. */
const NONE = -1;
const SPELLED = -3;

/**
 * The character a plain escape at `i` stands for (`%XX`, `\u00XX`, `\xXX`, `&#DDD`,
 * `&#xHH` with or without `;`, a named one), and where it ends (escapeEnd); NONE when the
 * `%`, `\` or `&` starts none, SPELLED when its characters are not plain ones.
 */
function plainEscape(s: Text, i: number): number {
  const c = at(s, i);
  const e = at(s, i + 1);
  if (e === END || isLayer(e)) return SPELLED;
  if (c === PCT) {
    const l = at(s, i + 2);
    if (hexValue(e) < 0) return NONE;
    if (l === END || isLayer(l)) return SPELLED;
    if (hexValue(l) < 0) return NONE;
    escapeEnd = i + 3;
    return hexValue(e) * 16 + hexValue(l);
  }
  if (c === BSL) {
    if (e !== 0x75 && e !== 0x78) return e === 0x55 || e === BSL ? SPELLED : NONE;
    const n = e === 0x75 ? 4 : 2;
    let v = 0;
    for (let k = i + 2; k < i + 2 + n; k++) {
      const h = hexValue(at(s, k));
      if (h < 0) return isLayer(at(s, k)) || at(s, k) === END ? SPELLED : NONE;
      v = v * 16 + h;
    }
    escapeEnd = i + 2 + n;
    return Math.min(v, 0xff);
  }
  if (e === HASH) {
    const hex = (at(s, i + 2) | 0x20) === 0x78;
    const from = hex ? i + 3 : i + 2;
    let v = 0;
    let k = from;
    for (let d = digitAt(s, k, hex); d >= 0 && k - from < 8; d = digitAt(s, ++k, hex)) v = v * (hex ? 16 : 10) + d;
    const f = at(s, k);
    if (k === from) return isLayer(f) || f === END ? SPELLED : NONE;
    // Its digits end where the text does, unless more may follow (cut).
    if (isLayer(f) || (f === END && cutAnswer) || digitAt(s, k, hex) >= 0) return SPELLED;
    escapeEnd = f === SEMI ? k + 1 : k;
    return Math.min(v, 0xff);
  }
  const v = namedAt(s, i + 1, s.length);
  if (v < 0) return v === MAYBE ? SPELLED : NONE;
  escapeEnd = namedEnd;
  return v;
}
/** The look's answer where the text ends within an escape: whether more of it may follow (a short part read: `cut`). */
let cutAnswer = false;
/** Steps of one look, past which it is answered true (read whole): a few in all but contrived text. */
const LOOK_STEPS = 256;
let steps = 0;

/** Whether the escape at `j` (a `%`, `\` or `&`) may decode, through any nesting, to a character of `t`. */
function escapeTo(s: Text, j: number, t: Uint8Array, depth: number): boolean {
  const c = at(s, j);
  if (c === PCT) return afterPercent(s, j + 1, t, depth);
  if (c === BSL) return afterBackslash(s, j + 1, t, depth);
  return c === AMP && afterAmp(s, j + 1, t, depth);
}

/** Whether the character at `j`, standing in an escape, may read as one of `t`: as it is, or as an escape starting there. */
function charTo(s: Text, j: number, t: Uint8Array, depth: number): boolean {
  if (++steps > LOOK_STEPS) return true;
  const c = at(s, j);
  if (c === END) return cutAnswer;
  if (inSet(t, c)) return true;
  return isLayer(c) && (depth >= LOOK_DEPTH || escapeTo(s, j, t, depth + 1));
}

/** Whether character `v`, decoded, with the text from `j` after it, reads as one of `t`. */
function decodedTo(s: Text, v: number, j: number, t: Uint8Array, depth: number): boolean {
  if (inSet(t, v) || ++steps > LOOK_STEPS) return true;
  if (depth >= LOOK_DEPTH) return isLayer(v);
  if (v === PCT) return afterPercent(s, j, t, depth + 1);
  if (v === BSL) return afterBackslash(s, j, t, depth + 1, true);
  return v === AMP && afterAmp(s, j, t, depth + 1);
}

/** After a `%`: its two hex digits. */
function afterPercent(s: Text, j: number, t: Uint8Array, depth: number): boolean {
  const h = at(s, j);
  if (h === END) return cutAnswer;
  if (isLayer(h)) return charTo(s, j, HEX_SET, depth);
  const hv = hexValue(h);
  if (hv < 0) return false;
  const l = at(s, j + 1);
  if (l === END) return cutAnswer;
  if (isLayer(l)) return charTo(s, j + 1, HEX_SET, depth);
  const lv = hexValue(l);
  return lv >= 0 && decodedTo(s, hv * 16 + lv, j + 2, t, depth);
}

/**
 * After a `\`: `uXXXX`, `xXX` or `UXXXXXXXX`. A `\` after it makes `\\`, read as `\`
 * (then what follows). A `%` or `&` after it, or after one decoded a `\` too, may
 * spell the letter (`%5C\u0075…`: the escape pass reads it before the `\` is there),
 * or a second `\` (`\%5Cx73`, `&bsol;&bsol;u0073`: `\\` once decoded).
 */
function afterBackslash(s: Text, j: number, t: Uint8Array, depth: number, decoded = false): boolean {
  const e = at(s, j);
  if (e === END) return cutAnswer;
  if (e === BSL) return decodedTo(s, BSL, j + 1, t, depth) || (decoded && charTo(s, j, ESCAPE_SET, depth));
  if (isLayer(e)) return charTo(s, j, ESCAPE_SET, depth);
  const k = e === 0x75 ? 4 : e === 0x78 ? 2 : e === 0x55 ? 8 : 0;
  if (k === 0) return false;
  let v = 0;
  for (let n = j + 1; n <= j + k; n++) {
    const c = at(s, n);
    if (c === END) return cutAnswer;
    if (isLayer(c)) return charTo(s, n, HEX_SET, depth);
    const h = hexValue(c);
    if (h < 0) return false;
    v = v * 16 + h;
  }
  return decodedTo(s, Math.min(v, 0xff), j + 1 + k, t, depth);
}

/** After a `&`: a numeric reference, or a named one (NAMED). */
function afterAmp(s: Text, j: number, t: Uint8Array, depth: number): boolean {
  const e = at(s, j);
  if (e === END) return cutAnswer;
  if (e === HASH) return afterHash(s, j + 1, t, depth);
  if (isLayer(e)) return charTo(s, j, AMP_SET, depth);
  const v = namedAt(s, j, s.length);
  // A letter of the name spelled in turn (`&a%6Dp;`): whether it may be that letter (the text cut short: cut).
  if (v === MAYBE) return maybeAt < 0 || charTo(s, maybeAt, letterSet(maybeLetter), depth);
  if (v < 0) return false;
  // `&amp` may go without its `;`, or with one spelled (`%26amp%3B%23115%3B`).
  return v === AMP && at(s, namedEnd - 1) !== SEMI
    ? afterRef(s, v, namedEnd, t, depth)
    : decodedTo(s, v, namedEnd, t, depth);
}

/**
 * After a reference to `v` that may go on with its `;` (at `k`): plain; spelled one
 * layer deep (`&#37%3B73` read percent first), what follows read after it; spelled
 * deeper, the escape at `k` standing for a `%`, `\` or `&` that spells it in turn
 * (`&amp&#37;3B#115;`, `&amp\\x3B`), or with its own characters spelled (`%3&#66;`),
 * the place read whole (true); or none.
 */
function afterRef(s: Text, v: number, k: number, t: Uint8Array, depth: number): boolean {
  const c = at(s, k);
  if (c === SEMI) return decodedTo(s, v, k + 1, t, depth);
  if (isLayer(c)) {
    if (oneEscape(s, k) === SEMI) {
      if (decodedTo(s, v, escapeEnd, t, depth)) return true;
    } else if (charTo(s, k, SEMI_SET, depth)) return true;
  }
  return decodedTo(s, v, k, t, depth);
}

/** Where the escape oneEscape read ends. */
let escapeEnd = 0;
/**
 * The character the escape at `k` stands for, one layer undone, its characters plain
 * (`%3B`, `\u003B`, `\x3B`, `\U0000003B`, `&#59;`, `&#x3B`), and where it ends
 * (escapeEnd); -1 when none is there or its characters are not plain.
 */
function oneEscape(s: Text, k: number): number {
  const c = at(s, k);
  if (c === AMP) {
    if (at(s, k + 1) !== HASH) return -1;
    const hex = (at(s, k + 2) | 0x20) === 0x78;
    let j = hex ? k + 3 : k + 2;
    let v = 0;
    for (let d = digitAt(s, j, hex); d >= 0; d = digitAt(s, ++j, hex)) v = Math.min(v * (hex ? 16 : 10) + d, 0x110000);
    if (j === (hex ? k + 3 : k + 2) || isLayer(at(s, j))) return -1;
    escapeEnd = at(s, j) === SEMI ? j + 1 : j;
    return Math.min(v, 0xff);
  }
  const e = at(s, k + 1);
  const n = c === PCT ? 2 : c !== BSL ? 0 : e === 0x75 ? 4 : e === 0x78 ? 2 : e === 0x55 ? 8 : 0;
  if (n === 0) return -1;
  const from = c === PCT ? k + 1 : k + 2;
  let v = 0;
  for (let j = from; j < from + n; j++) {
    const d = hexValue(at(s, j));
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  escapeEnd = from + n;
  return Math.min(v, 0xff);
}
const digitAt = (s: Text, j: number, hex: boolean): number => {
  const c = at(s, j);
  return hex ? hexValue(c) : c >= 0x30 && c <= 0x39 ? c - 0x30 : -1;
};

/** After `&#`: decimal digits, or `x` and hex digits (leading zeros any number), then `;` or not. */
function afterHash(s: Text, j: number, t: Uint8Array, depth: number): boolean {
  const e = at(s, j);
  if (e === END) return cutAnswer;
  if (isLayer(e)) return charTo(s, j, REF_SET, depth);
  const hex = e === 0x78 || e === 0x58;
  const from = hex ? j + 1 : j;
  let v = 0;
  let k = from;
  for (; ; k++) {
    const c = at(s, k);
    if (c === END) {
      if (cutAnswer) return true;
      break;
    }
    // A digit spelled in turn (`&#1%315;`), or the reference ended without its `;`.
    if (isLayer(c))
      return charTo(s, k, hex ? HEX_SET : DEC_SET, depth) || (k > from && afterRef(s, Math.min(v, 0xff), k, t, depth));
    const d = hex ? hexValue(c) : c >= 0x30 && c <= 0x39 ? c - 0x30 : -1;
    if (d < 0) break;
    if (k - from >= LONG_DIGITS) return true;
    v = Math.min(v * (hex ? 16 : 10) + d, 0x110000);
  }
  if (k === from) return false;
  return decodedTo(s, Math.min(v, 0xff), at(s, k) === SEMI ? k + 1 : k, t, depth);
}

/**
 * Named references read (HTML's; XML's `&amp;`): those that spell a character of a
 * key (`_`, and `fj` whole) or of an escape (`&`, `%`, `\`, `#`). `&amp;` in either
 * case and without its `;` (HTML's legacy parsing); the others as HTML has them.
 */
const NAMED: [string, number[]][] = [
  ['percnt;', [PCT]],
  ['bsol;', [BSL]],
  ['num;', [HASH]],
  ['lowbar;', [0x5f]],
  ['UnderBar;', [0x5f]],
  ['fjlig;', [0x66, 0x6a]],
];
/** The look's answer where a name is cut short or spelled in turn (`&a%6Dp;`). */
const MAYBE = -2;
/** Where the name namedAt read ends. */
let namedEnd = 0;

/** The character the named reference at `j` (after its `&`; the text `n` long) stands for, -1 when none, or MAYBE. */
function namedAt(s: Text, j: number, n: number): number {
  const e = at(s, j, n);
  if ((e | 0x20) === 0x61) {
    const k = nameAt(s, j, n, 'amp', true);
    if (k < 0) return k;
    namedEnd = at(s, k, n) === SEMI ? k + 1 : k;
    return AMP;
  }
  const named = e >= 0 && e < 256 ? NAMED_BY_START[e] : undefined;
  if (named === undefined) return -1;
  const k = nameAt(s, j, n, named[0], false);
  if (k < 0) return k;
  namedEnd = k;
  return named[1][0] as number;
}
let maybeAt = -1;
let maybeLetter = 0;
/** A set of one letter (either case: `amp` is read so). */
const letterSet = (c: number): Uint8Array => {
  let t = LETTERS[c];
  if (t === undefined) t = LETTERS[c] = charSet(String.fromCharCode(c, c ^ 0x20));
  return t;
};
const LETTERS: (Uint8Array | undefined)[] = [];
/** NAMED by the first letter of the name (each first letter is one name's). */
const NAMED_BY_START: ([string, number[]] | undefined)[] = [];
for (const entry of NAMED) NAMED_BY_START[entry[0].charCodeAt(0)] = entry;

/**
 * The end of `name` at `j`, -1 when not there, or MAYBE: the text ends in it (maybeAt
 * -1), or a `%`, `\` or `&` stands in it at maybeAt, where maybeLetter is wanted.
 */
function nameAt(s: Text, j: number, n: number, name: string, anyCase: boolean): number {
  for (let k = 0; k < name.length; k++) {
    let c = at(s, j + k, n);
    if (c === END) {
      maybeAt = -1;
      return cutAnswer ? MAYBE : -1;
    }
    if (isLayer(c)) {
      maybeAt = j + k;
      maybeLetter = name.charCodeAt(k);
      return MAYBE;
    }
    if (anyCase) c |= 0x20;
    if (c !== name.charCodeAt(k)) return -1;
  }
  return j + name.length;
}

/**
 * Whether text holds a key as an application reads it after up to eight rounds of
 * decoding of each kind: percent sequences (as a URL, form or header value is read),
 * escapes (as JSON or YAML reads a string), and character references (as XML or HTML
 * reads text), alternating so nestings in any order are read (JSON in a form value in
 * XML), NUL bytes left out (ASCII in UTF-16/32 read as bytes). A character past
 * Latin-1 stands as U+00FF: it ends a key, as it would.
 */
function keyInText(s: string): boolean {
  const m = fillText(s);
  if (read(m, m, false, false)) return true;
  let long = lastRead.long;
  // A reference without its `;` before an escape of a digit reads one way or the other (see read).
  if (lastRead.open) {
    if (read(fillText(s), m, false, true)) return true;
    long = Math.max(long, lastRead.long);
  }
  return long > 0 && keyInSomeReading(bufs[0].toString('latin1', 0, fillText(s)), long, false);
}
function fillText(s: string): number {
  const n = s.length;
  const src = scratch(n, 0);
  let m = 0;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c !== 0) src[m++] = Math.min(c, 0xff);
  }
  return m;
}

/** Text decoded through, as keyInText reads it (a reference before an escape read as its digits going on). */
export function decodedForKeys(s: string): string {
  const m = fillText(s);
  read(m, m, false, false);
  return lastRead.buf.toString('latin1', 0, lastRead.length);
}

/**
 * Whether bytes `b[from, to)` (one a character, NULs left out) hold a key as keyIn
 * finds one (`more`), read as keyInText reads text; lastRead.after then tells how
 * many characters they decode to after those spelled by the bytes before `mark`.
 */
export function keyInSpan(b: Uint8Array, from: number, to: number, mark: number, more: boolean): boolean {
  const q = fillSpan(b, from, to, mark);
  const m = filled;
  decodeWork.bytes += to - from;
  if (read(m, q, more, false)) return true;
  let long = lastRead.long;
  if (lastRead.open) {
    const after = lastRead.after;
    const found = read(m, fillSpan(b, from, to, mark), more, true);
    lastRead.after = Math.min(after, lastRead.after);
    if (found) return true;
    long = Math.max(long, lastRead.long);
  }
  if (long === 0) return false;
  fillSpan(b, from, to, mark);
  return keyInSomeReading(bufs[0].toString('latin1', 0, filled), long, more);
}
/** Bytes fillSpan put in the first scratch buffer. */
let filled = 0;
/** Copies `b[from, to)` into the first scratch buffer, NULs left out (`filled` bytes); where `mark` falls there. */
function fillSpan(b: Uint8Array, from: number, to: number, mark: number): number {
  const src = scratch(to - from, 0);
  if (b.subarray(from, to).indexOf(0) === -1) {
    src.set(b.subarray(from, to));
    filled = to - from;
    return Math.min(mark, to) - from;
  }
  let m = 0;
  let q = -1;
  for (let i = from; i < to; i++) {
    if (i === mark) q = m;
    const c = b[i] as number;
    if (c !== 0) src[m++] = c;
  }
  filled = m;
  return q === -1 ? m : q;
}

/**
 * Bytes run through the decoder's passes (each pass counts the bytes it reads), for
 * tests that bound the work a body costs per byte.
 */
export const decodeWork = { bytes: 0 };

/**
 * The last read: its bytes (`buf`, `length` of them); `after`, how many of them are
 * spelled by bytes from the mark it was given on; `open`, whether some escape or
 * percent sequence decoded stood right after a reference without its `;` (`&#x64%45`:
 * an application that reads references first reads `dE`, one that reads them last
 * reads `&#x64E4`); `long`, how many runs longer than a key (LONG_RUN) it found where
 * it found no key, something decoded (else 0); `undecided`, set (never cleared) by
 * keyIn where text cut short may end a key with an escape cut off there: the caller
 * clears it first.
 */
export const lastRead: {
  buf: Buffer;
  length: number;
  after: number;
  open: boolean;
  long: number;
  undecided: boolean;
} = {
  buf: Buffer.alloc(0),
  length: 0,
  after: 0,
  open: false,
  long: 0,
  undecided: false,
};

/** Two buffers the passes read from and write to in turn (grown, never shrunk). */
const bufs: [Buffer, Buffer] = [Buffer.alloc(1 << 16), Buffer.alloc(1 << 16)];
function scratch(n: number, k: 0 | 1): Buffer {
  if (bufs[k].length < n) bufs[k] = Buffer.alloc(Math.max(n, 2 * bufs[k].length));
  return bufs[k];
}

/** What each kind of pass undoes, by the byte it starts at: escapes, percent, references. */
const PASS_BYTES = [BSL, PCT, AMP];
const PASSES = 3 * ROUNDS + 1;

/**
 * Whether the first `n` bytes of the first scratch buffer, decoded through, hold a
 * key (keyIn, `more`). Passes undo escapes, then percent sequences, then references,
 * then escapes again…: each one layer, so a nesting in any order is read; three
 * passes in a row that change nothing end it. `q`: a mark in the bytes, followed
 * through to lastRead.after. The extent of a reference without its `;` depends on
 * what is read before it: an escape after it undone first makes its digits go on
 * (`&#x6%34` is `&#x64`, `&#x64%45` is `&#x64E`); `refsFirst` reads references first
 * (until a pass of them changes nothing), as an application that reads XML or HTML
 * before what it holds does (`&#x64%45` is `dE`).
 */
function read(n: number, q: number, more: boolean, refsFirst: boolean): boolean {
  let src = bufs[0];
  let dst = scratch(n, 1);
  let len = n;
  let idle = 0;
  let work = 0;
  opened = false;
  for (let p = refsFirst ? -ROUNDS : 0; p < PASSES && idle < 3; p++) {
    const kind = p < 0 ? 2 : p % 3;
    // A pass with nothing to undo is skipped (a native look for its `\\`, `%` or `&`).
    if (src.subarray(0, len).indexOf(PASS_BYTES[kind] as number) === -1) {
      if (p < 0) p = -1;
      else idle++;
      continue;
    }
    work += len;
    passMark = q;
    // An escape after a reference left open needs the reference's `#` (lastRead.open).
    refsOpen = kind !== 2 && src.subarray(0, len).indexOf(HASH) !== -1;
    const out =
      kind === 0
        ? escapePass(src, len, dst, q)
        : kind === 1
          ? percentPass(src, len, dst, q)
          : refPass(src, len, dst, q);
    q = passMark;
    if (p < 0) {
      if (out === len) p = -1;
    } else idle = out === len ? idle + 1 : 0;
    len = out;
    const t = src;
    src = dst;
    dst = t;
  }
  decodeWork.bytes += work;
  lastRead.buf = src;
  lastRead.length = len;
  lastRead.after = len - Math.min(q, len);
  lastRead.open = opened;
  const text = src.toString('latin1', 0, len);
  if (keyIn(text, more)) return true;
  lastRead.long = len < n ? longRuns(text) : 0;
  return false;
}

/**
 * `svc_live_` or `svc_test_` and more base62 than a key has, as decoded through. A key
 * read plainly never changes (no pass reads base62 or `_`), but what ends it may be an
 * escape of base62 that a later pass reads on (`KEY%41…`: a key as sent, a longer run
 * decoded): where the decoding ends in such a run, every other reading is made
 * (keyInSomeReading). A run as long as sent is as long in every reading (no pass
 * shortens one): only more of them decoded than sent calls for the other readings.
 */
const LONG_RUN = /svc_(?:live|test)_[0-9A-Za-z]{129}/g;
function longRuns(s: string): number {
  let n = 0;
  LONG_RUN.lastIndex = 0;
  while (LONG_RUN.test(s)) n++;
  return n;
}
/**
 * Readings keyInSomeReading makes at most, past which it answers true: a few in text of
 * one encoder's spellings (each layer wraps all of it), past a hundred only where each
 * character is spelled its own way, or where unrelated nestings of each kind stand
 * near; each costs one pass.
 */
const READINGS = 64;
/**
 * `left`: bytes keyInSomeReading's passes may read, all told, before it answers true
 * and sets `over` (as it does past READINGS): a body's scan (key-scan.ts) gives a
 * little per byte, so that a body of such runs costs a few passes a byte more, never a
 * pass per reading; text read alone (a header, a URL) has READINGS only.
 */
export const readingsBudget = { left: Number.POSITIVE_INFINITY, over: false };

/**
 * Whether some reading an application could make of text (`sent`, as sent, NULs left
 * out) shows a key (keyIn, `more`), where decoding through it ends in `long` runs longer
 * than a key (no more than it holds as sent: none): the text as sent, and the text
 * after any sequence of passes (escapes, percent, references, in any order, up to
 * ROUNDS of each: an application undoes the layers it knows, in the order they nest).
 * read follows one order; a key stands in another where what ends it is spelled in a
 * layer the reading leaves (`KEY%41…` as sent, `&#115;vc…%41…` to an XML reader,
 * `\\u0073vc…%41…` to JSON in JSON). Breadth first, each reading once; past READINGS,
 * or readingsBudget, true (readingsBudget.over: text is held to show a key, a body is
 * past what the gateway reads).
 */
function keyInSomeReading(sent: string, long: number, more: boolean): boolean {
  if (keyIn(sent, more)) return true;
  if (longRuns(sent) >= long) return false;
  const first = Buffer.from(sent, 'latin1');
  const seen = new Set<string>([sent]);
  const texts = [first];
  // Rounds of each kind of pass that made each reading, 4 bits each.
  const rounds = [0];
  let work = 0;
  try {
    for (let k = 0; k < texts.length; k++) {
      const t = texts[k] as Buffer;
      const r = rounds[k] as number;
      for (let kind = 0; kind < 3; kind++) {
        if (((r >> (4 * kind)) & 15) >= ROUNDS || t.indexOf(PASS_BYTES[kind] as number) === -1) continue;
        const len = t.length;
        if (seen.size >= READINGS || readingsBudget.left < len) {
          readingsBudget.over = true;
          return true;
        }
        readingsBudget.left -= len;
        const d = Buffer.allocUnsafe(len);
        refsOpen = false;
        work += len;
        const out =
          kind === 0 ? escapePass(t, len, d, len) : kind === 1 ? percentPass(t, len, d, len) : refPass(t, len, d, len);
        if (out === len) continue;
        const text = d.toString('latin1', 0, out);
        if (seen.has(text)) continue;
        if (keyIn(text, more)) return true;
        seen.add(text);
        texts.push(d.subarray(0, out));
        rounds.push(r + (1 << (4 * kind)));
      }
    }
    return false;
  } finally {
    decodeWork.bytes += work;
  }
}

/**
 * Where the mark of the pass that ran last fell in what it wrote: the bytes written
 * for what starts before the mark (an escape that starts before it counts whole).
 */
let passMark = 0;
/** Whether a pass of this read undid an escape right after a reference without its `;` (lastRead.open). */
let opened = false;
/** Whether the text the pass reads holds a `#`, so that an escape may stand after an open reference. */
let refsOpen = false;

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

/**
 * Whether the bytes before `i` end a reference not yet ended (`#` and decimal digits,
 * or `#x` and hex digits, with no `;`; a run of digits past LONG_DIGITS too): an
 * escape at `i` undone before the reference is read may make it go on. A cheap first
 * look: the byte before is a hex digit.
 */
function afterOpenRef(s: Uint8Array, i: number): boolean {
  let j = i - 1;
  if (j < 0 || (HEX[s[j] as number] as number) < 0) return false;
  for (; j >= 0 && (HEX[s[j] as number] as number) >= 0; j--) if (i - j > LONG_DIGITS) return true;
  if (j < 0) return false;
  if (s[j] === HASH) {
    for (let k = j + 1; k < i; k++) if (((s[k] as number) ^ 0x30) >= 10) return false;
    return true;
  }
  return ((s[j] as number) | 0x20) === 0x78 && j > 0 && s[j - 1] === HASH;
}

// Each pass runs its loop twice: up to the mark `q` (where passMark is taken), then on to the end.

/** `%XX` sequences decoded (as a URL, form or header value is read); the length written. */
function percentPass(s: Uint8Array, n: number, d: Uint8Array, q: number): number {
  let o = 0;
  let i = 0;
  for (let stop = Math.min(q, n); ; stop = n) {
    for (; i < stop; i++) {
      const c = s[i] as number;
      if (c === PCT && i + 2 < n) {
        const h = HEX[s[i + 1] as number] as number;
        const l = HEX[s[i + 2] as number] as number;
        if ((h | l) >= 0) {
          if (refsOpen && afterOpenRef(s, i)) opened = true;
          d[o++] = h * 16 + l;
          i += 2;
          continue;
        }
      }
      d[o++] = c;
    }
    if (stop === n) break;
    passMark = o;
  }
  if (q >= n) passMark = o;
  return o;
}

/** `\uXXXX`, `\xXX`, `\UXXXXXXXX` and `\\` undone (as JSON or YAML reads a string); the length written. */
function escapePass(s: Uint8Array, n: number, d: Uint8Array, q: number): number {
  let o = 0;
  let i = 0;
  for (let stop = Math.min(q, n); ; stop = n) {
    for (; i < stop; i++) {
      const c = s[i] as number;
      if (c === BSL) {
        const e = s[i + 1];
        const k = e === 0x75 ? 4 : e === 0x78 ? 2 : e === 0x55 ? 8 : 0;
        const v = k === 0 ? -1 : hexAt(s, i + 2, k, n);
        if (v >= 0) {
          if (refsOpen && afterOpenRef(s, i)) opened = true;
          d[o++] = Math.min(v, 0xff);
          i += 1 + k;
          continue;
        }
        if (e === BSL && i + 1 < n) {
          d[o++] = BSL;
          i += 1;
          continue;
        }
      }
      d[o++] = c;
    }
    if (stop === n) break;
    passMark = o;
  }
  if (q >= n) passMark = o;
  return o;
}

/**
 * XML/HTML character references undone (as an XML or HTML parser reads text):
 * `&#DDD` and `&#xHH` (either case of `x`, any number of digits, `;` or not) as the
 * character (past U+00FF as U+00FF), `&amp;` and the NAMED ones; the length written.
 */
function refPass(s: Uint8Array, n: number, d: Uint8Array, q: number): number {
  let o = 0;
  let i = 0;
  for (let stop = Math.min(q, n); ; stop = n) {
    for (; i < stop; i++) {
      const c = s[i] as number;
      if (c === AMP && i + 2 < n) {
        const e = s[i + 1] as number;
        if (e === HASH) {
          const hex = ((s[i + 2] as number) | 0x20) === 0x78;
          const from = hex ? i + 3 : i + 2;
          let k = from;
          let v = 0;
          if (hex)
            for (; k < n; k++) {
              const h = HEX[s[k] as number] as number;
              if (h < 0) break;
              v = v < 0x110000 ? v * 16 + h : v;
            }
          else
            for (; k < n; k++) {
              const h = (s[k] as number) - 0x30;
              if (h < 0 || h > 9) break;
              v = v < 0x110000 ? v * 10 + h : v;
            }
          if (k > from) {
            d[o++] = Math.min(v, 0xff);
            i = k < n && s[k] === SEMI ? k : k - 1;
            continue;
          }
        } else if (AMP_SET[e] === 1) {
          const v = namedAt(s, i + 1, n);
          if (v >= 0) {
            d[o++] = v;
            // `&fjlig;` stands for two characters.
            if (v === 0x66) d[o++] = 0x6a;
            i = namedEnd - 1;
            continue;
          }
        }
      }
      d[o++] = c;
    }
    if (stop === n) break;
    passMark = o;
  }
  if (q >= n) passMark = o;
  return o;
}

/** Whether text holds a gateway key in any of these spellings. */
export const spellsKey = (s: string): boolean => maySpellKey(s) && keyInText(s);

/**
 * Whether decoded text holds a key; `more`: text follows that is not here yet, so a
 * key-like run reaching the end is left for the next look (which sees it whole), and so
 * is one whose end may be an escape the cut leaves half read (`…%6`, `…\u00`, `…&#9`
 * read as a tab, where `%61`, `\u0061`, `&#97;` go on): what ends it stands within the
 * last UNDECIDED characters, or is a `%`, `\` or `&` that only characters of escapes
 * follow to the end (a longer spelling cut short). lastRead.undecided tells; the look
 * reads further, or again once more has come.
 */
export function keyIn(decoded: string, more: boolean): boolean {
  if (!more) return KEY.test(decoded);
  const m = KEY_BEFORE_END.exec(decoded);
  if (m === null) return false;
  const end = m.index + m[0].length;
  if (decoded.length - end > UNDECIDED) {
    if (!isLayer(decoded.charCodeAt(end))) return true;
    ESCAPES_TO_END.lastIndex = end + 1;
    if (!ESCAPES_TO_END.test(decoded)) return true;
  }
  lastRead.undecided = true;
  return false;
}
const KEY_BEFORE_END = /svc_(?:live|test)_[0-9A-Za-z]{32,128}(?=[^0-9A-Za-z])/;
/** Characters before the end of a cut read within which what ends a key may be an escape cut short. */
const UNDECIDED = 64;
const ESCAPES_TO_END = /[#0-9A-Za-z;%\\&]*$/y;

/**
 * One character of a key in the spellings replaced in place: plain, `%XX`, `%25XX`,
 * `\u00XX`, `\xXX`, `%5Cu00XX`, `&#DDD` and `&#xHH` (leading zeros, either case of
 * `x`, `;` or not where the digits end: a `;` that follows is the reference's, as the
 * decoder reads it, never left for what follows to be matched without it), and
 * `others` (named references); `hex` and `dec` are patterns of its code.
 */
function spelled(plain: string, hex: string, dec: string, others = ''): string {
  return `(?:${plain}|%(?:25)?${hex}|(?:\\\\|%5[cC])(?:u00|x)${hex}|&#0*${dec}(?:;|(?![0-9;]))|&#[xX]0*${hex}(?:;|(?![0-9A-Fa-f;]))${others})`;
}
const hexPattern = (c: string): string =>
  c
    .charCodeAt(0)
    .toString(16)
    .replace(/[a-f]/g, (h) => `[${h}${h.toUpperCase()}]`);
const letter = (c: string): string =>
  spelled(c, hexPattern(c), String(c.charCodeAt(0)), c === '_' ? '|&lowbar;|&UnderBar;' : '');
const word = (w: string): string => [...w].map(letter).join('');
const BASE62 = spelled(
  '[0-9A-Za-z]',
  '(?:3[0-9]|4[1-9A-Fa-f]|5[0-9Aa]|6[1-9A-Fa-f]|7[0-9Aa])',
  '(?:4[89]|5[0-7]|6[5-9]|[78][0-9]|9[07-9]|1[01][0-9]|12[0-2])',
);

/**
 * A key in the spellings that can be replaced where they stand (one layer of
 * encoding per character, any mix). Deeper nestings are found by `spellsKey` and
 * replaced with the whole value that holds them.
 */
export const spelledKeyIn = (flags: string): RegExp =>
  new RegExp(`${word('svc_')}(?:${word('live')}|${word('test')})${letter('_')}${BASE62}{32,128}(?!${BASE62})`, flags);

const EVERY_SPELLED = spelledKeyIn('g');

/**
 * The start of a key at the very end of text cut short (a body past max_body_bytes),
 * down to `svc_live_`, with an escape or reference cut off after it (`%7`, `\u00`, `&#11`, `&#x`, `&am`).
 */
const CUT_KEY = new RegExp(
  `${word('svc_')}(?:${word('live')}|${word('test')})${letter('_')}${BASE62}{0,128}(?:(?:%|\\\\)[0-9A-Za-z]{0,7}|&(?:#[xX]?[0-9A-Fa-f]*|[A-Za-z]{0,8}))?$`,
);

/** Text cut short with the start of a key at its end replaced by `replace(start)`. */
export function replaceCutKey(s: string, replace: (k: string) => string): string {
  if (!maySpellKey(s)) return s;
  return s.replace(CUT_KEY, replace);
}

/**
 * Text with each key replaced by `replace(key as spelled)`, and each key as sent that
 * escapes of base62 follow (`KEY%41…`); when a key remains in a spelling that cannot
 * be cut out (nested deeper), `whole(text)` stands for all of it.
 */
export function replaceKeys(s: string, replace: (k: string) => string, whole: (s: string) => string): string {
  if (s.length < KEY_MIN_LENGTH || !maySpellKey(s)) return s;
  let out = s.replace(EVERY_SPELLED, replace);
  if (!spellsKey(out)) return out;
  out = out.replace(EVERY_AS_SENT, replace);
  return spellsKey(out) ? whole(s) : out;
}
const EVERY_AS_SENT = new RegExp(KEY.source, 'g');
/**
 * The fewest characters a key has (`svc_live_` and 32 base62, as KEY reads it). Every
 * pass of a reading (escapes, percent-encoding, references; NULs left out) makes text
 * shorter or leaves it, never longer: text shorter than this spells no key in any
 * reading, and is not read (a form of a thousand short values costs a look each).
 */
const KEY_MIN_LENGTH = 'svc_live_'.length + 32;
