/**
 * JSON read without losing numbers: JSON.parse turns 9007199254740993 into
 * 9007199254740992, so two answers that differ there would compare equal (Node 20
 * has no source text in JSON.parse's reviver). Here a number keeps its text as
 * written, and numbers compare by exact decimal value: `1`, `1.0`, `1e0` and `10e-1`
 * are equal (JSON numbers are values, not spellings), `-0` equals `0`, and numbers
 * past a double's precision or range compare digit by digit.
 */

/** What a JSON number is written with: `-+.eE` and digits. */
const NUMBER_CHARS = new Set([...'-+.eE0123456789'].map((c) => c.charCodeAt(0)));

/** A JSON number as written. */
export class JsonNumber {
  constructor(readonly text: string) {}
}

/** A JSON value as `parseExact` reads it: objects have no prototype, numbers are `JsonNumber`. */
export type ExactValue = null | boolean | string | JsonNumber | ExactValue[] | { [k: string]: ExactValue };

/**
 * Parses JSON text, numbers kept as written. The text is checked by JSON.parse first
 * (which throws on anything not JSON); the walk below relies on it being valid.
 * Duplicate keys: the last value wins at the first key's place, as JSON.parse does.
 */
export function parseExact(text: string): ExactValue {
  JSON.parse(text);
  let i = 0;
  const space = (): void => {
    for (let c = text.charCodeAt(i); c === 32 || c === 10 || c === 13 || c === 9; c = text.charCodeAt(++i));
  };
  const string = (): string => {
    const s = i;
    for (i++; ; i++) {
      const c = text.charCodeAt(i);
      if (c === 92) i++;
      else if (c === 34) break;
    }
    i++;
    const raw = text.slice(s, i);
    return raw.indexOf('\\') === -1 ? raw.slice(1, -1) : (JSON.parse(raw) as string);
  };
  const value = (): ExactValue => {
    space();
    const c = text.charCodeAt(i);
    if (c === 34) return string();
    if (c === 123) {
      i++;
      const o: { [k: string]: ExactValue } = Object.create(null);
      space();
      if (text.charCodeAt(i) === 125) {
        i++;
        return o;
      }
      for (;;) {
        space();
        const k = string();
        space();
        i++; // ':'
        o[k] = value();
        space();
        if (text.charCodeAt(i++) !== 44) return o; // '}'
      }
    }
    if (c === 91) {
      i++;
      const a: ExactValue[] = [];
      space();
      if (text.charCodeAt(i) === 93) {
        i++;
        return a;
      }
      for (;;) {
        a.push(value());
        space();
        if (text.charCodeAt(i++) !== 44) return a; // ']'
      }
    }
    if (c === 116) {
      i += 4;
      return true;
    }
    if (c === 102) {
      i += 5;
      return false;
    }
    if (c === 110) {
      i += 4;
      return null;
    }
    const s = i;
    for (let x = c; i < text.length && NUMBER_CHARS.has(x); x = text.charCodeAt(++i));
    return new JsonNumber(text.slice(s, i));
  };
  return value();
}

/**
 * A number's exact value as a canonical text: sign, significant digits with no
 * leading or trailing zeros, and the exponent of the last digit (`-12e3` for -12000,
 * `0` for any zero), so two numbers are equal exactly when their canonical texts are.
 */
export function canonicalNumber(text: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([-+]?\d+))?$/.exec(text);
  if (m === null) return text;
  const [, sign, int, frac = '', exp = '0'] = m as unknown as [string, string, string, string?, string?];
  const all = `${int}${frac}`;
  const lead = all.search(/[1-9]/);
  if (lead === -1) return '0';
  const digits = all.slice(lead).replace(/0+$/, '');
  const shift = all.length - lead - digits.length - frac.length;
  const e = exp.replace(/^([-+]?)0+(?=\d)/, '$1').replace(/^\+/, '');
  // An exponent of more than 30 digits (a text no number type reads) is kept as
  // written: two such spellings of one value may then compare unequal.
  if (e.replace('-', '').length > 30) return `${sign}${digits}e${e}${shift >= 0 ? '+' : ''}${shift}`;
  return `${sign}${digits}e${BigInt(e) + BigInt(shift)}`;
}

/** Whether two values read by `parseExact` are equal (numbers by exact value, objects by own keys in any order). */
export function sameExact(a: ExactValue | undefined, b: ExactValue | undefined): boolean {
  if (a instanceof JsonNumber || b instanceof JsonNumber)
    return a instanceof JsonNumber && b instanceof JsonNumber && canonicalNumber(a.text) === canonicalNumber(b.text);
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((v, i) => sameExact(v, b[i]));
  }
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && sameExact(a[k], b[k]));
}

/**
 * A value read by `parseExact` as plain JSON data, for a diff: a number as a
 * JavaScript number when that is exact, else as its text as written (a string: a
 * number such as 9007199254740993 that no double holds).
 */
export function plainOf(v: ExactValue | undefined): unknown {
  if (v instanceof JsonNumber) {
    const n = Number(v.text);
    return Number.isFinite(n) && canonicalNumber(String(n)) === canonicalNumber(v.text) ? n : v.text;
  }
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(plainOf);
  const o: Record<string, unknown> = {};
  // Defined, not assigned: a key `__proto__` stays a key.
  for (const k of Object.keys(v))
    Object.defineProperty(o, k, { value: plainOf(v[k]), enumerable: true, writable: true, configurable: true });
  return o;
}
