import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';

/** One character as an application decodes it back: plain, percent-encoded (once or twice), escaped, or both. */
const CHAR_SPELLINGS: ((c: string) => string)[] = [
  (c) => c,
  (c) => `%${hex(c)}`,
  (c) => `%25${hex(c)}`,
  (c) => `\\u00${hex(c)}`,
  (c) => `\\x${hex(c)}`,
  (c) => `%5Cu00${hex(c)}`,
];
const hex = (c: string) => c.charCodeAt(0).toString(16).padStart(2, '0');

/** A word with each character spelled one of those ways (most plain). */
export const spelledWord = (word: string): fc.Arbitrary<string> =>
  fc
    .array(fc.nat({ max: 11 }), { minLength: word.length, maxLength: word.length })
    .map((picks) =>
      [...word].map((c, i) => (CHAR_SPELLINGS[(picks[i] as number) % 6] as (c: string) => string)(c)).join(''),
    );

/** A layer an application undoes around text: a JSON string, a form value, JSON in a JSON string. */
const LAYERS: ((s: string) => string)[] = [
  (s) => JSON.stringify({ note: s }),
  (s) => `a=1&note=${encodeURIComponent(s)}`,
  (s) => JSON.stringify({ payload: JSON.stringify({ note: s }) }),
  (s) => `note: "${s}"\n`,
];

/** Text around a word: anything but base62 right next to it (a key is not followed by another base62). */
const around = fc.string({ maxLength: 40, unit: fc.constantFrom(...' {}"\':,.;=&\n-é東'.split('')) });

/** Text holding `word` spelled, with 0 to 2 layers around it. */
export const embedded = (word: string): fc.Arbitrary<string> =>
  fc
    .tuple(around, spelledWord(word), around, fc.array(fc.nat({ max: 3 }), { maxLength: 2 }))
    .map(([a, w, b, layers]) => layers.reduce((s, l) => (LAYERS[l] as (s: string) => string)(s), `${a}${w} ${b}`));

export type Charset = 'utf8' | 'utf16le' | 'utf16be' | 'utf32le' | 'utf32be';

/** Text in a charset, with or without its byte-order mark. */
export function encodeText(s: string, cs: Charset, bom: boolean): Buffer {
  const t = bom && cs !== 'utf8' ? `\ufeff${s}` : s;
  if (cs === 'utf8') return Buffer.from(t);
  if (cs === 'utf16le') return Buffer.from(t, 'utf16le');
  if (cs === 'utf16be') return Buffer.from(t, 'utf16le').swap16();
  const cps = [...t].map((c) => c.codePointAt(0) as number);
  const b = Buffer.alloc(cps.length * 4);
  for (let i = 0; i < cps.length; i++) {
    if (cs === 'utf32le') b.writeUInt32LE(cps[i] as number, i * 4);
    else b.writeUInt32BE(cps[i] as number, i * 4);
  }
  return b;
}

const CODINGS: Record<string, (b: Buffer) => Buffer> = { gzip: gzipSync, deflate: deflateSync, br: brotliCompressSync };

/** A body: text in a charset (declared or not), content codings (nested) over it; its headers. */
export const keyBody = (word: string) =>
  fc
    .record({
      text: embedded(word),
      charset: fc.constantFrom<Charset>('utf8', 'utf16le', 'utf16be', 'utf32le', 'utf32be'),
      bom: fc.boolean(),
      declared: fc.boolean(),
      codings: fc.array(fc.constantFrom('gzip', 'deflate', 'br'), { maxLength: 2 }),
      type: fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', ''),
    })
    .map((r) => {
      let body = encodeText(r.text, r.charset, r.bom);
      for (const c of r.codings) body = (CODINGS[c] as (b: Buffer) => Buffer)(body);
      const headers: Record<string, string> = {};
      if (r.type !== '')
        headers['content-type'] =
          r.declared && r.charset !== 'utf8' ? `${r.type}; charset=${r.charset.replace('utf', 'utf-')}` : r.type;
      if (r.codings.length > 0) headers['content-encoding'] = r.codings.join(', ');
      return { ...r, body, headers };
    });

/** Cut points of a body into pieces (sorted, within it). */
export const cuts = (n: number) =>
  fc.uniqueArray(fc.integer({ min: 1, max: Math.max(1, n - 1) }), { maxLength: 6 }).map((a) => a.sort((x, y) => x - y));

export function split(b: Buffer, at: number[]): Buffer[] {
  const out: Buffer[] = [];
  let last = 0;
  for (const i of at) {
    if (i <= last || i >= b.length) continue;
    out.push(b.subarray(last, i));
    last = i;
  }
  out.push(b.subarray(last));
  return out;
}
