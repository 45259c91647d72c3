import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BodyRefused, KeyGate, refusedBody } from '../../src/capture/key-scan.js';
import { decodeWork, keyInSpan, maySpellKey, spellsStart } from '../../src/capture/key-spelling.js';
import { holdsGatewayKey } from '../../src/capture/text.js';
import { encodeText, split } from '../helpers/key-spellings.js';

/**
 * Every property here runs on one seed, so that a gap another seed would find does not
 * fail a run at random; try others by hand: `KEY_SPELLING_SEED=7 npm test -- test/unit/key-`.
 */
const SEED = Number(process.env.KEY_SPELLING_SEED ?? 20261127);
fc.configureGlobal({ seed: SEED });

/**
 * The cheap look (spellsStart, key-spelling.ts) against the decoder: whenever the
 * decoder reads a key's start in text, the look answers true there, in every order of
 * layers (percent, JSON/YAML escapes, numeric and named references, nested in turn);
 * and ordinary XML, HTML and JSON with `&#38;`, `&amp;`, `%26` that spell no key's start
 * fail it (are not decoded).
 */

const KEY = `svc_live_${'aB3x'.repeat(10)}`;
const LAYER_BYTES = [0x25, 0x5c, 0x26];

/** The first place in bytes where the look (or a plain `svc`) answers true, or -1; `cut`: the bytes are a short part. */
function firstStart(b: Uint8Array, cut = false): number {
  const svc = Buffer.from(b.buffer, b.byteOffset, b.length).indexOf('svc');
  let end = svc === -1 ? b.length : svc;
  for (let i = 0; i < end; i++) if (LAYER_BYTES.includes(b[i] as number) && spellsStart(b, i, cut)) end = i;
  return end === b.length && svc === -1 ? -1 : end;
}
/** Where the scan of UTF-16/32 among other bytes would start reading: 32 bytes from a `%`, `\`, `&` or `s`, cut. */
function firstWide(b: Uint8Array): number {
  for (let q = 0; q < b.length; q++)
    if ((LAYER_BYTES.includes(b[q] as number) || b[q] === 0x73) && firstStart(b.subarray(q, q + 32), true) !== -1)
      return q;
  return -1;
}

/** One character spelled by one layer (`v`: the layer's variant; `next`: the character after it). */
type Spell = (c: string, v: number, next: string) => string;
const hx = (c: string, up: boolean) => {
  const h = c.charCodeAt(0).toString(16).padStart(2, '0');
  return up ? h.toUpperCase() : h;
};
const dc = (c: string) => String(c.charCodeAt(0));
const zeros = (v: number) => '0'.repeat(v % 4);
const NAMES: Record<string, string[]> = {
  '&': ['&amp;', '&AMP;', '&amp', '&Amp;'],
  '%': ['&percnt;'],
  '\\': ['&bsol;'],
  '#': ['&num;'],
  _: ['&lowbar;', '&UnderBar;'],
};
/** The layers: each spells a character its own way (or leaves it, where it has none for it). */
const KINDS: Spell[] = [
  (c, v) => `%${hx(c, v % 2 === 0)}`,
  (c, v) => `\\u00${hx(c, v % 2 === 0)}`,
  (c, v) => `\\x${hx(c, v % 2 === 0)}`,
  (c, v) => `\\U000000${hx(c, v % 2 === 0)}`,
  // JSON's `\\`.
  (c) => (c === '\\' ? '\\\\' : c),
  // Decimal references, zero-padded or not, the `;` left out where no digit follows.
  (c, v) => `&#${zeros(v)}${dc(c)};`,
  (c, v, n) => `&#${zeros(v)}${dc(c)}${/^[0-9]/.test(n) || n === '' ? ';' : ''}`,
  (c, v) => `&#${v % 2 ? 'x' : 'X'}${zeros(v >> 1)}${hx(c, v % 3 === 0)};`,
  (c, v, n) =>
    `&#${v % 2 ? 'x' : 'X'}${zeros(v >> 1)}${hx(c, v % 3 === 0)}${/^[0-9A-Fa-f]/.test(n) || n === '' ? ';' : ''}`,
  (c, v) => {
    const names = NAMES[c];
    return names === undefined ? c : (names[v % names.length] as string);
  },
];
/** Which characters a layer spells: all; some of the layers' own (`%&\#;`); or each by chance. */
const SELECT = fc.oneof(
  { arbitrary: fc.constant({ all: true, specials: '', p: 0 }), weight: 2 },
  {
    arbitrary: fc.record({
      all: fc.constant(false),
      specials: fc.subarray([...'%&\\#;'], { minLength: 1 }).map((a) => a.join('')),
      p: fc.constant(0),
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      all: fc.constant(false),
      specials: fc.constantFrom('', '%&\\#;'),
      p: fc.double({ min: 0.1, max: 0.9, noNaN: true }),
    }),
    weight: 2,
  },
);
const LAYER = fc.record({
  kind: fc.nat({ max: KINDS.length - 1 }),
  variant: fc.nat({ max: 11 }),
  select: SELECT,
  coins: fc.array(fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }), { minLength: 64, maxLength: 64 }),
});
type Layer = typeof LAYER extends fc.Arbitrary<infer T> ? T : never;

/** Text through one layer. */
function through(s: string, l: Layer): string {
  const spell = KINDS[l.kind] as Spell;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charAt(i);
    const pick = l.select.all || l.select.specials.includes(c) || (l.coins[i % 64] as number) < l.select.p;
    out += pick ? spell(c, l.variant, s.charAt(i + 1)) : c;
  }
  return out;
}

/**
 * A key's first 1 to 5 characters (after `lead`, pieces of escapes, when asked) through
 * 1 to `max` layers in any order, the rest of it plain.
 */
const layered = (max: number, withLead: boolean) =>
  fc
    .record({
      head: fc.integer({ min: 1, max: 5 }),
      layers: fc.array(LAYER, { minLength: 1, maxLength: max }),
      live: fc.boolean(),
      lead: fc.array(
        fc.constantFrom('&', '%', '\\', '#', ';', 'amp', '&amp;', '%25', '&#', 'x', '7', '3', '5C', '26', 'a=1&b='),
        { maxLength: withLead ? 3 : 0 },
      ),
    })
    .map(({ head, layers, live, lead }) => {
      const k = live ? KEY : KEY.replace('live', 'test');
      return `${layers.reduce(through, lead.join('') + k.slice(0, head))}${k.slice(head)} `;
    });

/** Whether the decoder reads a key in text (one a byte). */
const decoderFinds = (text: string) => {
  const b = Buffer.from(text, 'latin1');
  return keyInSpan(b, 0, b.length, b.length, false);
};

/** Streams a body through a gate in pieces: whether it refused. */
async function gateRefuses(pieces: Buffer[], ct: string): Promise<boolean> {
  const gate = new KeyGate(ct);
  try {
    for (const p of pieces) await gate.push(p);
    await gate.end();
    return false;
  } catch (e) {
    if (!(e instanceof BodyRefused)) throw e;
    return true;
  } finally {
    gate.close();
  }
}

describe('the cheap look follows every order of layers the decoder reads', () => {
  it('property: a key start through up to 4 layers in any order: where the decoder reads a key, the look answers true at its start (string, bytes, bytes cut short)', () => {
    let keys = 0;
    fc.assert(
      fc.property(layered(4, false), (text) => {
        if (!decoderFinds(text)) return;
        keys++;
        expect(maySpellKey(text), text).toBe(true);
        const b = Buffer.from(text, 'latin1');
        // At the start, or close enough after it that the scan's read (64 bytes back) holds it.
        const at = firstStart(b);
        expect(at >= 0 && at <= 64, text).toBe(true);
        const wide = firstWide(b);
        expect(wide >= 0 && wide <= 64, text).toBe(true);
      }),
      { numRuns: 4000, seed: SEED },
    );
    expect(keys).toBeGreaterThan(3500);
  });

  it('property: the same after pieces of escapes, the layers over them too: a body holding it is refused, UTF-8 or UTF-16', () => {
    let keys = 0;
    fc.assert(
      fc.property(layered(4, true), fc.constantFrom('utf8' as const, 'utf16le' as const), (text, cs) => {
        if (!decoderFinds(text)) return;
        keys++;
        expect(maySpellKey(text), text).toBe(true);
        expect(firstStart(Buffer.from(text, 'latin1')), text).toBeGreaterThanOrEqual(0);
        const body = Buffer.concat([Buffer.alloc(3000, ' '), encodeText(`<a>${text}</a>`, cs, false)]);
        expect(refusedBody(body, 'text/plain'), text).not.toBeNull();
      }),
      { numRuns: 2000, seed: SEED },
    );
    expect(keys).toBeGreaterThan(1600);
  });
});

/**
 * Keys the look missed before it followed the `;` of a reference spelled two layers deep
 * or more, or a `\` spelled after a `\`; the decoder read each. Found by the properties
 * here, and by those of key-charref.test.ts and key-scan.test.ts run by hand with many
 * seeds (the seed of each below).
 */
const MISSED: [string, string][] = [
  // key-scan.test.ts's random-spellings property (key-charref.test.ts's too), seeds 82 and
  // 176: `&amp` whose `;` is `%253B`, a `%` spelling `%3B` (no reference to `%`, `&` or `\`).
  [
    '&amp whose ; is percent-encoded twice (%2526amp%253B…)',
    'a=1&note=a%3D1%26note%3D%2526amp%253Bamp%253B%2523x73%253B%2526amp%253Bamp%253B%2523x76%253Bc_test_1ZY4B2dhvNFjjP7uaUF8f7xM20g37cuxirAUq%2520',
  ],
  // key-charref.test.ts's property of pieces, seed 193: `\` then a `\` spelled (`\\`, read as `\`).
  ['a \\ then a \\ percent-encoded (%\\\\%5Cx373)', `%\\\\%5Cx373${KEY.slice(1)}`],
  ['a \\ then a \\ as &bsol; (&AMP;&bsol;&bsol;u0023X73)', `&AMP;&bsol;&bsol;u0023X73${KEY.slice(1)}`],
  ['a \\ then a \\ percent-encoded, decoded (%26%5c%5cx23X073%5c%5cx3b)', `%26%5c%5cx23X073%5c%5cx3b${KEY.slice(1)}`],
  // The `;` of a reference as `\U0000003B` (a YAML escape).
  ['&amp whose ; is \\U0000003b', `\\U00000026amp\\U0000003b#000115${KEY.slice(1)}`],
  [
    'references without ; each followed by \\U0000003b',
    `&#x026\\U0000003b&#x023\\U0000003b&#x031\\U0000003b&#x031\\U0000003b&#x035\\U0000003b&#x03b\\U0000003b${KEY.slice(1)}`,
  ],
  // This file's first property, seed 20261127, before: a reference to `%` without its `;`, then `\U0000003B`.
  [
    '&#37 then \\U0000003B (&#37\\U0000003B&#55\\U0000003B…)',
    `&#37\\U0000003B&#55\\U0000003B&#51\\U0000003B${KEY.slice(1)}`,
  ],
  // The `;` escaped in JSON inside JSON (`\\u003B`): `\\`, read as `\`, then `u003B`.
  [
    'references whose ; is \\\\u003B (JSON in JSON)',
    `\\\\u0026#00037\\\\u003B\\\\u0026#00055\\\\u003B\\\\u0026#00051\\\\u003B${KEY.slice(1)}`,
  ],
  // The one CI found (seed -1642193267), read whole before by a rule of its own.
  [
    'a reference to % spelling &amp; then &#115; (&#37;26amp&#37;3B&#37;23115&#37;3B)',
    `&#37;26amp&#37;3B&#37;23115&#37;3B${KEY.slice(1)}`,
  ],
];

describe('keys the look missed, pinned', () => {
  it.each(MISSED)(
    '%s: the look answers true, the key is found and the body refused, buffered or streamed',
    async (_n, s) => {
      expect(decoderFinds(s)).toBe(true);
      expect(maySpellKey(s)).toBe(true);
      expect(holdsGatewayKey(s)).toBe(true);
      const body = Buffer.from(`{"note":"x"}\n${s}\n`);
      expect(refusedBody(body, 'application/json')).not.toBeNull();
      expect(await gateRefuses(split(body, [7, body.length - 30]), 'application/json')).toBe(true);
      const far = Buffer.concat([Buffer.alloc(70_000, ' '), body]);
      expect(refusedBody(far, 'application/json')).not.toBeNull();
    },
  );
});

describe('ordinary text with references to &, % or \\ itself is not decoded', () => {
  // A numeric reference to `&`, `%` or `\` (`&#38;`, `&#x26;`, `&#37;`, `&#92;`) was read whole
  // (decoded) by a rule of its own; the look now follows what it opens, and these open nothing.
  const TEXTS: [string, string][] = [
    ['XML with &#38; and &#x26;', '<a href="/x?a=1&#38;b=2">AT&#38;T &#x26; Sons &#X26; co &#038;</a>'],
    ['XML with &#37; and &#92;', '<p>100&#37; of C:&#92;Temp &#x25; &#x5C;n</p>'],
    ['XML with &amp;, &#38;amp; and &amp;#38;', '<q>R&amp;D &#38;amp; more &amp;#38; &#38;lt;b&#38;gt;</q>'],
    ['HTML with &#38; before names and numbers', '<p>&#38;nbsp; &#38;copy; &#38;#169; &#38;#x20AC; &#38; x</p>'],
    ['a form value with %26 and &#38;', 'a=1&b=fish%20%26%20chips&c=AT%26T&d=AT&#38;T&e=%2526'],
    [
      'JSON with \\u0026 and &#38;',
      JSON.stringify({ html: '<b>R&#38;D</b> &#x26; Q&amp;A', s: 'a \u0026 b', t: '\\u0026#38;' }),
    ],
  ];
  it.each(TEXTS)('%s: the look answers false, bytes or text; the body is not decoded', (_n, t) => {
    expect(maySpellKey(t), t).toBe(false);
    const body = Buffer.from(t.repeat(2000));
    expect(firstStart(body)).toBe(-1);
    decodeWork.bytes = 0;
    expect(refusedBody(body, 'application/xml')).toBeNull();
    expect(decodeWork.bytes).toBe(0);
  });
});
