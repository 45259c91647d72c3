import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';

/**
 * One character as an application decodes it back: plain, percent-encoded (once or
 * twice), escaped, or an XML/HTML character reference (decimal or hex, either case of
 * `x`, leading zeros, the `;` left out where the next character, however spelled,
 * cannot continue it, nested in `&amp;`, `&#38;`, `\u0026` or percent-encoding, or
 * spelling `%` or `\` that go on to spell it). `next`: the character that follows.
 */
const CHAR_SPELLINGS: ((c: string, next: string) => string)[] = [
  (c) => c,
  (c) => `%${hex(c)}`,
  (c) => `%25${hex(c)}`,
  (c) => `\\u00${hex(c)}`,
  (c) => `\\x${hex(c)}`,
  (c) => `%5Cu00${hex(c)}`,
  (c) => `&#${dec(c)};`,
  (c) => `&#x${hex(c)};`,
  (c) => `&#X${hex(c).toUpperCase()};`,
  (c) => `&#000${dec(c)};`,
  (c) => `&#x00${hex(c)};`,
  (c, next) => `&#${dec(c)}${/^[0-9]/.test(next) ? ';' : ''}`,
  (c, next) => `&#x${hex(c)}${/^[0-9A-Fa-f]/.test(next) ? ';' : ''}`,
  (c) => `&amp;#${dec(c)};`,
  (c) => `&amp;amp;#x${hex(c)};`,
  (c) => `&#38;#${dec(c)};`,
  (c) => `\\u0026#${dec(c)};`,
  (c) => `%26%23${dec(c)}%3B`,
  (c) => `&#37;${hex(c)}`,
  (c) => `&#x5C;u00${hex(c)}`,
];
const hex = (c: string) => c.charCodeAt(0).toString(16).padStart(2, '0');
const dec = (c: string) => String(c.charCodeAt(0));

/**
 * A word with every character spelled the same one of those ways, as an encoder
 * writes text (each layer around all of it): no reading of it shows a key unless the
 * word is one, however long (a longer run is longer in every reading).
 */
export const spelledAlike = (word: string): fc.Arbitrary<string> =>
  fc
    .nat({ max: CHAR_SPELLINGS.length - 1 })
    .map((pick) =>
      [...word]
        .map((c, i) => (CHAR_SPELLINGS[pick] as (c: string, next: string) => string)(c, word.charAt(i + 1)))
        .join(''),
    );

/** A word with each character spelled one of those ways. */
export const spelledWord = (word: string): fc.Arbitrary<string> =>
  fc
    .array(fc.nat({ max: CHAR_SPELLINGS.length - 1 }), { minLength: word.length, maxLength: word.length })
    .map((picks) =>
      // A reference without its `;` only where the next character is no digit of it: read the same by any application.
      [...word]
        .map((c, i) =>
          (CHAR_SPELLINGS[picks[i] as number] as (c: string, next: string) => string)(c, word.charAt(i + 1)),
        )
        .join(''),
    );

/**
 * Text with XML/HTML numeric character references and `&amp;` undone, rounds times
 * over (as an XML parser, or one reading XML held in XML, reads it).
 */
export function undoCharRefs(s: string, rounds = 3): string {
  let t = s;
  for (let r = 0; r < rounds; r++)
    t = t.replace(/&(?:#[xX]([0-9A-Fa-f]+);?|#([0-9]+);?|amp;)/g, (_m, x: string | undefined, d: string | undefined) =>
      x === undefined && d === undefined
        ? '&'
        : String.fromCharCode(Math.min(Number.parseInt(x ?? (d as string), x === undefined ? 10 : 16), 0xffff)),
    );
  return t;
}

/** A layer an application undoes around text: a JSON string, a form value, JSON in a JSON string, YAML, XML text, references. */
const LAYERS: ((s: string) => string)[] = [
  (s) => JSON.stringify({ note: s }),
  (s) => `a=1&note=${encodeURIComponent(s)}`,
  (s) => JSON.stringify({ payload: JSON.stringify({ note: s }) }),
  (s) => `note: "${s}"\n`,
  // XML text (its `&` and `<` escaped: a reference in it is nested), and an encoder writing references.
  (s) => `<note a="1">${s.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</note>`,
  (s) => s.replace(/[&<>"'%\\]/g, (c) => `&#${c.charCodeAt(0)};`),
];

/** Text around a word: anything but base62 right next to it (a key is not followed by another base62). */
const around = fc.string({ maxLength: 40, unit: fc.constantFrom(...' {}"\':,.;=&\n-é東'.split('')) });

/** Text holding `word` spelled (each character its own way, unless `spell` says), with 0 to 2 layers around it. */
export const embedded = (word: string, spell = spelledWord): fc.Arbitrary<string> =>
  fc
    .tuple(around, spell(word), around, fc.array(fc.nat({ max: LAYERS.length - 1 }), { maxLength: 2 }))
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
export const keyBody = (word: string, spell = spelledWord) =>
  fc
    .record({
      text: embedded(word, spell),
      charset: fc.constantFrom<Charset>('utf8', 'utf16le', 'utf16be', 'utf32le', 'utf32be'),
      bom: fc.boolean(),
      declared: fc.boolean(),
      codings: fc.array(fc.constantFrom('gzip', 'deflate', 'br'), { maxLength: 2 }),
      type: fc.constantFrom(
        'application/json',
        'text/plain',
        'application/x-www-form-urlencoded',
        'application/xml',
        'text/html',
        '',
      ),
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

const KEY = /svc_(?:live|test)_[0-9A-Za-z]{32,128}(?![0-9A-Za-z])/;
/** The decodings an application makes, each undoing one layer: percent, JSON/YAML escapes, references. */
const DECODINGS: ((s: string) => string)[] = [
  (s) => s.replace(/%([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(Number.parseInt(h, 16))),
  (s) =>
    s.replace(/\\(?:u([0-9A-Fa-f]{4})|x([0-9A-Fa-f]{2})|U([0-9A-Fa-f]{8})|(\\))/g, (_m, u, x, w, bs) =>
      bs !== undefined ? '\\' : String.fromCharCode(Math.min(Number.parseInt(u ?? x ?? w, 16), 0xffff)),
    ),
  (s) => undoCharRefs(s, 1),
];

/**
 * Whether some reading of text an application could make shows a key: the text as sent,
 * and after any sequence of up to `depth` decodings (percent, escapes, references; each
 * kind any number of times, in any order). The tests' own reading, not the gateway's.
 */
export function keyInSomeReading(text: string, depth = 10): boolean {
  const seen = new Set([text]);
  let level = [text];
  for (let d = 0; d <= depth && level.length > 0; d++) {
    const next: string[] = [];
    for (const t of level) {
      if (KEY.test(t)) return true;
      for (const decode of DECODINGS) {
        const u = decode(t);
        if (!seen.has(u)) {
          seen.add(u);
          next.push(u);
        }
      }
    }
    level = next;
  }
  return false;
}

const BASE62 = fc.constantFrom(...'0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'.split(''));
/**
 * A key followed by base62 that make the run longer than 128 (so decoded through it is
 * no key), the key spelled alike one way and what follows alike one way (the same or
 * another): a key in a reading that undoes the key's spelling and leaves the other
 * (`KEY%41…` as sent), else none. `text`: the two spelled, in text and layers.
 */
export const keyThenMore = fc
  .record({
    kind: fc.constantFrom('live', 'test'),
    key: fc.string({ unit: BASE62, minLength: 32, maxLength: 128 }),
    more: fc.string({ unit: BASE62, minLength: 129, maxLength: 160 }),
    keySpelling: fc.nat({ max: CHAR_SPELLINGS.length - 1 }),
    moreSpelling: fc.nat({ max: CHAR_SPELLINGS.length - 1 }),
  })
  .chain(({ kind, key, more, keySpelling, moreSpelling }) => {
    const k = `svc_${kind}_${key}`;
    const all = k + more.slice(0, 129 - key.length + (more.length % 24));
    const spelled = [...all]
      .map((c, i) =>
        (CHAR_SPELLINGS[i < k.length ? keySpelling : moreSpelling] as (c: string, next: string) => string)(
          c,
          all.charAt(i + 1),
        ),
      )
      .join('');
    return embedded(spelled, fc.constant).map((text) => ({ key: k, text }));
  });
