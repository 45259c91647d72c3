import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { holdsGatewayKey, KEY_REPLACED, withoutGatewayKeys } from '../../src/capture/text.js';
import { carriesGatewayKey, forwardRequestHeaders } from '../../src/proxy/headers.js';
import { appReadings } from '../helpers/app-decode.js';
import {
  embedded,
  keyInSomeReading,
  keyThenMore,
  spelledAlike,
  spelledWord,
  undoCharRefs,
} from '../helpers/key-spellings.js';

/**
 * Every property here runs on one seed, so that a gap another seed would find does not
 * fail a run at random; try others by hand: `KEY_SPELLING_SEED=7 npm test -- test/unit/headers-keys`.
 */
const SEED = Number(process.env.KEY_SPELLING_SEED ?? 20261127);
fc.configureGlobal({ seed: SEED });

const BASE62 = fc.constantFrom(...'0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'.split(''));
/** A key's secret as newSecret makes one (43 base62), or any length the grammar allows; drawn, so a seed replays it. */
const secret = fc.oneof(
  fc.string({ unit: BASE62, minLength: 43, maxLength: 43 }),
  fc.string({ unit: BASE62, minLength: 32, maxLength: 128 }),
);

const base = {
  dropAuthorization: false,
  clientIp: '127.0.0.1',
  clientTrusted: false,
  proto: 'http' as const,
  originHost: 'origin',
  identity: null,
};

/** What an origin reads of the headers it is sent: each name and value, and Basic credentials decoded (RFC 7617). */
const asRead = (raw: string[]): string[] =>
  raw.flatMap((v) => (/^basic /i.test(v) ? [v, Buffer.from(v.slice(6).trim(), 'base64').toString('latin1')] : [v]));

describe('request headers for an auth: none origin: a gateway key never passes, wherever it stands', () => {
  /** A key, and the same key with its characters spelled as an application decodes them back. */
  const key = fc
    .tuple(fc.constantFrom('svc_live_', 'svc_test_'), secret)
    .map(([p, s]) => `${p}${s}`)
    .chain((k) => spelledWord(k).map((spelled) => [k, spelled] as const));

  it('in a value, in a field name (any spelling a token allows), or as Basic credentials', () => {
    fc.assert(
      fc.property(
        key,
        fc.constantFrom('value', 'name', 'basic-user', 'basic-password', 'basic-alone'),
        fc.boolean(),
        ([k, spelledKey], where, spelled) => {
          // A field name is a token: a key spelled with %XX is one too (the scan decodes it).
          const name = spelled ? spelledKey : k;
          const b64 = (s: string) => Buffer.from(s).toString('base64');
          const field: [string, string] =
            where === 'value'
              ? ['x-api-key', name]
              : where === 'name'
                ? [name.replace(/\\/g, ''), '1']
                : [
                    'Authorization',
                    `Basic ${b64(where === 'basic-user' ? `${k}:` : where === 'basic-password' ? `user:${k}` : k)}`,
                  ];
          const raw = ['Accept', '*/*', ...field, 'User-Agent', 'fuzz/1'];
          const out = forwardRequestHeaders(raw, base);
          expect(asRead(out).some((v) => carriesGatewayKey(v))).toBe(false);
          // The other fields pass.
          expect(out.slice(0, 2)).toEqual(['Accept', '*/*']);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("passes the origin's own Basic credentials, and Basic text that is not base64 of a key", () => {
    const own = `Basic ${Buffer.from('user:pass').toString('base64')}`;
    expect(forwardRequestHeaders(['Authorization', own], base)).toContain(own);
    expect(forwardRequestHeaders(['Authorization', 'Basic !!not base64!!'], base)).toContain('Basic !!not base64!!');
  });
});

/** Whether any reading an application could make of text (references undone too) shows `piece`. */
const shows = (t: string, piece: string) =>
  [t, undoCharRefs(t), ...appReadings(Buffer.from(t)), ...appReadings(Buffer.from(undoCharRefs(t), 'latin1'))].some(
    (x) => x.includes(piece),
  );

describe('URLs and header values (holdsGatewayKey, withoutGatewayKeys): a key is found and cut out in any spelling', () => {
  /** Where a value stands: a path segment, a query value, a header value (Bearer, cookie), as sent or encoded once more. */
  const PLACES: ((s: string) => string)[] = [
    (s) => `/v1/keys/${s}/rotate`,
    (s) => `/v1/items?page=2&token=${s}&sort=asc`,
    (s) => `/v1/items?q=${encodeURIComponent(s)}`,
    (s) => `/cb?next=${encodeURIComponent(`/v1/x?key=${s}`)}`,
    (s) => `Bearer ${s}`,
    (s) => `theme=dark; session=${s}; lang=en`,
  ];
  const place = fc.nat({ max: PLACES.length - 1 });
  /** A word spelled as a URL or header may hold it: its characters spelled (`spell`), or in text and layers around it. */
  const spelledIn = (w: string, spell = spelledWord) => fc.oneof(spell(w), embedded(w, spell));

  // Found while spelling long words alike: the in-place pattern matched a reference without the
  // `;` that follows it (`&#97` then `;`), so the 129th character read as what ends a key, and a
  // word longer than a key, every character a reference, was cut as one.
  it('a word longer than a key, every character a reference with its `;`, is left as it is', () => {
    for (const w of [
      `svc_live_${'&#97;'.repeat(140)}`,
      `svc_test_${'&#x61;'.repeat(140)}`,
      `svc_live_${'&#X41;'.repeat(129)}`,
    ]) {
      for (const text of [w, `/v1/k/${w}/x`, `Bearer ${w}`]) {
        expect(holdsGatewayKey(text), text).toBe(false);
        expect(withoutGatewayKeys(text)).toBe(text);
      }
    }
    // A key so spelled is still cut out, its `;` with it.
    expect(withoutGatewayKeys(`a ${'svc_live_'}${'&#97;'.repeat(40)} b`)).toBe(`a ${KEY_REPLACED} b`);
  });

  it('property: a key in a URL or header value, in any spelling, is found, and withoutGatewayKeys leaves it in no reading', () => {
    const key = fc.tuple(fc.constantFrom('live', 'test'), secret).map(([c, s]) => `svc_${c}_${s}`);
    fc.assert(
      fc.property(
        key.chain((k) => spelledIn(k).map((s) => ({ k, s }))),
        place,
        ({ k, s }, p) => {
          const text = (PLACES[p] as (s: string) => string)(s);
          expect(holdsGatewayKey(text), text).toBe(true);
          const out = withoutGatewayKeys(text);
          expect(out, text).toContain(KEY_REPLACED);
          expect(holdsGatewayKey(out), text).toBe(false);
          expect(shows(out, k.slice(9, 21)), text).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('property: a word that is not a key (fewer than 32 base62, or more than 128), in the same spellings, is left as it is', () => {
    // More than 128 spelled alike: spelled apart, a key may stand in a reading (keyThenMore).
    const word = fc
      .tuple(
        fc.constantFrom('live', 'test'),
        fc.oneof(
          fc.string({ unit: BASE62, maxLength: 31 }),
          fc.string({ unit: BASE62, minLength: 129, maxLength: 200 }),
        ),
      )
      .chain(([c, s]) => spelledIn(`svc_${c}_${s}`, s.length < 32 ? spelledWord : spelledAlike));
    fc.assert(
      fc.property(word, place, (s, p) => {
        const text = (PLACES[p] as (s: string) => string)(s);
        expect(holdsGatewayKey(text), text).toBe(false);
        expect(withoutGatewayKeys(text)).toBe(text);
      }),
      { numRuns: 300 },
    );
  });

  it('property: a key that base62 follow spelled (a longer run decoded): found exactly when some reading shows it, and then cut out', () => {
    let keys = 0;
    let words = 0;
    fc.assert(
      fc.property(keyThenMore, place, ({ key, text: s }, p) => {
        const text = (PLACES[p] as (s: string) => string)(s);
        const isKey = keyInSomeReading(text);
        if (isKey) keys++;
        else words++;
        expect(holdsGatewayKey(text), text).toBe(isKey);
        const out = withoutGatewayKeys(text);
        if (!isKey) expect(out).toBe(text);
        else {
          expect(holdsGatewayKey(out), text).toBe(false);
          expect(keyInSomeReading(out), text).toBe(false);
          expect(shows(out, key.slice(9, 21)), text).toBe(false);
        }
      }),
      { numRuns: 300 },
    );
    expect(Math.min(keys, words)).toBeGreaterThan(0);
  });
});
