import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BodyRefused, KeyGate, refusedBody } from '../../src/capture/key-scan.js';
import { decodeWork } from '../../src/capture/key-spelling.js';
import { holdsGatewayKey, withoutGatewayKeys } from '../../src/capture/text.js';
import { appReadings } from '../helpers/app-decode.js';
import {
  cuts,
  embedded,
  keyBody,
  keyInSomeReading,
  keyThenMore,
  spelledAlike,
  spelledWord,
  split,
} from '../helpers/key-spellings.js';

/**
 * Every property here runs on one seed, so that a gap another seed would find does not
 * fail a run at random; try others by hand: `KEY_SPELLING_SEED=7 npm test -- test/unit/key-`.
 */
const SEED = Number(process.env.KEY_SPELLING_SEED ?? 20261127);
fc.configureGlobal({ seed: SEED });

const BASE62 = fc.constantFrom(...'0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'.split(''));
const key = fc
  .tuple(fc.constantFrom('live', 'test'), fc.string({ unit: BASE62, minLength: 32, maxLength: 128 }))
  .map(([c, s]) => `svc_${c}_${s}`);
/**
 * Words that look like keys but are not, in a body: fewer than 32 base62, each character
 * spelled its own way; or more than 128, every character spelled alike (as an encoder
 * writes text: a key would stand in the reading that undoes the spelling of its first
 * characters and leaves that of the next one, were they spelled apart: see keyThenMore).
 */
const wordBody = fc
  .tuple(
    fc.constantFrom('live', 'test'),
    fc.oneof(fc.string({ unit: BASE62, maxLength: 31 }), fc.string({ unit: BASE62, minLength: 129, maxLength: 200 })),
  )
  .chain(([c, s]) => keyBody(`svc_${c}_${s}`, s.length < 32 ? spelledWord : spelledAlike));

/** Streams a body through a gate in pieces: what it let through, and whether it refused. */
async function gated(pieces: Buffer[], headers: Record<string, string>) {
  const gate = new KeyGate(headers['content-type'], headers['content-encoding']);
  const out: Buffer[] = [];
  try {
    for (const p of pieces) out.push(...(await gate.push(p)));
    out.push(...(await gate.end()));
    return { out: Buffer.concat(out), refused: null };
  } catch (e) {
    if (!(e instanceof BodyRefused)) throw e;
    return { out: Buffer.concat(out), refused: e };
  } finally {
    gate.close();
  }
}

/** Whether any reading an application could make of bytes shows `piece`. */
const shows = (b: Buffer, ce: string | undefined, piece: string) => appReadings(b, ce).some((t) => t.includes(piece));

describe('gateway keys in any spelling (issue #34, item 10)', () => {
  it('the key grammar: 32 to 128 base62, not followed by another', () => {
    const k = `svc_live_${'a1B2'.repeat(11)}`;
    expect(holdsGatewayKey(k)).toBe(true);
    expect(holdsGatewayKey('svc_live_paymentsReconciliation')).toBe(false);
    expect(holdsGatewayKey(`svc_live_${'a'.repeat(31)}`)).toBe(false);
    expect(holdsGatewayKey(`svc_live_${'a'.repeat(129)}`)).toBe(false);
    expect(holdsGatewayKey(k.replace('s', '%73'))).toBe(true);
    expect(holdsGatewayKey(k.replace('c', '\\u0063'))).toBe(true);
    expect(holdsGatewayKey(k.replace('s', '%255Cu0073'))).toBe(true);
    expect(withoutGatewayKeys(`a ${k.replace('v', '%76')} b`)).toBe('a [redacted:gateway-key] b');
  });

  it('property: a key in random spellings, layers, charsets and codings, cut anywhere, never gets through', async () => {
    await fc.assert(
      fc.asyncProperty(
        key.chain((k) => keyBody(k).chain((b) => cuts(b.body.length).map((at) => ({ k, b, at })))),
        async ({ k, b, at }) => {
          const piece = k.slice(9, 21);
          expect(refusedBody(b.body, b.headers['content-type'], b.headers['content-encoding'])).not.toBeNull();
          const g = await gated(split(b.body, at), b.headers);
          expect(g.refused).not.toBeNull();
          expect(shows(g.out, b.headers['content-encoding'], piece)).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('property: a key past 1 MiB of text, the body cut into random pieces, is refused before any of it passes', async () => {
    const filler = Buffer.alloc(1 << 20, 'x');
    await fc.assert(
      fc.asyncProperty(
        key.chain((k) => embedded(k).map((text) => ({ k, text }))),
        fc.nat({ max: 1 << 20 }),
        cuts(1 << 21),
        async ({ k, text }, shift, at) => {
          const body = Buffer.concat([filler.subarray(0, shift), Buffer.from(text), filler]);
          const g = await gated(split(body, at), { 'content-type': 'application/json' });
          expect(g.refused).not.toBeNull();
          expect(shows(g.out, undefined, k.slice(9, 21))).toBe(false);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('property: words that are not keys are never refused, in any spelling, and pass whole', async () => {
    await fc.assert(
      fc.asyncProperty(
        wordBody.chain((b) => cuts(b.body.length).map((at) => ({ b, at }))),
        async ({ b, at }) => {
          expect(refusedBody(b.body, b.headers['content-type'], b.headers['content-encoding'])).toBeNull();
          const g = await gated(split(b.body, at), b.headers);
          expect(g.refused).toBeNull();
          expect(g.out.equals(b.body)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('property: a key that base62 follow spelled (a longer run decoded) is refused exactly when some reading shows the key, cut anywhere', async () => {
    let keys = 0;
    let words = 0;
    await fc.assert(
      fc.asyncProperty(
        keyThenMore.chain(({ key, text }) =>
          fc
            .record({
              codings: fc.array(fc.constantFrom('gzip', 'deflate'), { maxLength: 1 }),
              at: cuts(text.length),
              type: fc.constantFrom('application/json', 'application/xml', 'text/plain'),
            })
            .map((r) => ({ key, text, ...r })),
        ),
        async ({ key, text, codings, at, type }) => {
          const isKey = keyInSomeReading(text);
          if (isKey) keys++;
          else words++;
          const headers: Record<string, string> = { 'content-type': type };
          let body = Buffer.from(text);
          if (codings.length > 0) {
            const { gzipSync, deflateSync } = await import('node:zlib');
            body = codings[0] === 'gzip' ? gzipSync(body) : deflateSync(body);
            headers['content-encoding'] = codings[0] as string;
          }
          expect(refusedBody(body, type, headers['content-encoding']) !== null, text).toBe(isKey);
          const g = await gated(split(body, at), headers);
          expect(g.refused !== null, text).toBe(isKey);
          if (isKey) expect(shows(g.out, headers['content-encoding'], key.slice(9, 21))).toBe(false);
          else expect(g.out.equals(body)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
    // Both kinds are drawn: a key as some reading has it, and a run longer in every reading.
    expect(Math.min(keys, words)).toBeGreaterThan(0);
  });

  // Found by the property above once long words were spelled alike (seed 20261127: UTF-32LE,
  // gzip, every character `\\u0026#NN;` in two layers): a scan of a streamed body cut within an
  // escape (`…%6`, `…&#9` read as a tab) read the cut as what ends a key, and refused a word of
  // more than 128 that the buffered scan passed. What ends a key there is decided by a read that
  // goes further.
  it('a word longer than a key, every character spelled, streamed and cut within an escape: passes whole', async () => {
    const words = [
      `svc_live_${'%61'.repeat(140)}`,
      `svc_live_${'&#97;'.repeat(140)}`,
      `svc_live_${'\\u0061'.repeat(140)}`,
      `&#115;&#118;&#99;&#95;&#108;&#105;&#118;&#101;&#95;${'&#x61;'.repeat(140)}`,
    ];
    for (const w of words) {
      const body = Buffer.from(`${'x'.repeat(20_000)} ${w} end`);
      for (let at = 20_001; at < 20_001 + w.length; at += 3) {
        const g = await gated(split(body, [at]), { 'content-type': 'text/plain' });
        expect(g.refused, `${w.slice(0, 14)} cut at ${at - 20_001}`).toBeNull();
        expect(g.out.equals(body)).toBe(true);
      }
    }
    // The counterexample itself: a word of 130 base62, every character `\\u0026#NN;`, in JSON in
    // JSON, then written with references; UTF-32LE, gzip, sent whole (read 16 KiB at a time).
    const word = `svc_test_${'hVb99vJiFrWHPWBfhu6diMzBmmXpyCdYXhNtUl5kiMEgB5yX7QxzSriyMiasb0qeoLn6xBe17CkUHw4UUYb0DPGbYe7XDuSYOgEUxSfzfJYO4uFJLsp5cQVTzvfirYflBN'}`;
    const note = `${[...word].map((c) => `\\u0026#${c.charCodeAt(0)};`).join('')} `;
    const text = JSON.stringify({ payload: JSON.stringify({ note }) }).replace(
      /[&<>"'%\\]/g,
      (c) => `&#${c.charCodeAt(0)};`,
    );
    const { encodeText } = await import('../helpers/key-spellings.js');
    const { gzipSync } = await import('node:zlib');
    const body = gzipSync(encodeText(text, 'utf32le', false));
    expect(refusedBody(body, 'application/json', 'gzip')).toBeNull();
    const g = await gated([body], { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    expect(g.refused).toBeNull();
    expect(g.out.equals(body)).toBe(true);
  });

  it('a body past its decoding budget is refused (413), and a coding the gateway cannot read (400)', async () => {
    const { gzipSync } = await import('node:zlib');
    const bomb = gzipSync(Buffer.alloc(65 * 1024 * 1024));
    expect(refusedBody(bomb, 'application/json', 'gzip')?.type).toBe('payload_too_large');
    const g = await gated(split(bomb, [1000, 20_000]), { 'content-encoding': 'gzip' });
    expect(g.refused?.type).toBe('payload_too_large');
    expect(refusedBody(Buffer.from('x'), '', 'compress')?.param).toBe('content-encoding');
    expect(() => new KeyGate('', 'compress')).toThrow(BodyRefused);
  });

  it('property: JSON -> percent -> JSON layering (hex digits of a %XX escaped in turn) is read to the key', async () => {
    const esc = (c: string) => `\\u00${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
    const hex = (c: string) => c.charCodeAt(0).toString(16).padStart(2, '0');
    /** One character: plain, %XX with its digits JSON-escaped, \u0025 then escaped digits, or %XX escaped whole. */
    const spell = [
      (c: string) => c,
      (c: string) => `%${[...hex(c)].map(esc).join('')}`,
      (c: string) => `${esc('%')}${[...hex(c)].map(esc).join('')}`,
      (c: string) => [...`%${hex(c)}`].map(esc).join(''),
    ];
    await fc.assert(
      fc.asyncProperty(
        key,
        fc.array(fc.nat({ max: 3 }), { minLength: 140, maxLength: 140 }),
        fc.boolean(),
        cuts(4000),
        async (k, picks, inJson, at) => {
          const spelled = [...k].map((c, i) => (spell[picks[i] as number] as (c: string) => string)(c)).join('');
          const text = inJson ? JSON.stringify({ note: spelled }) : spelled;
          const body = Buffer.from(text);
          expect(refusedBody(body, 'application/json')).not.toBeNull();
          const g = await gated(split(body, at), { 'content-type': 'application/json' });
          expect(g.refused).not.toBeNull();
        },
      ),
      { numRuns: 200 },
    );
    expect(refusedBody(Buffer.from(`{"a":"%\\u0037\\u0033v\\u0063_live_${'a1'.repeat(20)}"}`))).not.toBeNull();
  });

  it('the work of a scan is a small constant per byte, whatever the body spells (decoded bytes per byte)', async () => {
    const MiB = 1 << 20;
    const rep = (u: string) => Buffer.from(u.repeat(Math.ceil(MiB / u.length)).slice(0, MiB), 'latin1');
    const bodies = [
      '%73',
      '\\u005c',
      '%\0',
      '%25',
      '%2573',
      '\\u0073',
      '%\\',
      '%%',
      '%73\\u005c%\0%25\\x73s\0v\0',
      'svc',
    ];
    for (const u of bodies) {
      const body = rep(u);
      decodeWork.bytes = 0;
      refusedBody(body, 'application/json');
      const buffered = decodeWork.bytes / body.length;
      decodeWork.bytes = 0;
      const g = await gated(split(body, [1000, 70_000, 300_000, 700_000]), { 'content-type': 'application/json' });
      expect(g.refused).toBeNull();
      const streamed = decodeWork.bytes / body.length;
      expect({ u, buffered: buffered < 32, streamed: streamed < 32 }).toEqual({ u, buffered: true, streamed: true });
    }
  });

  it('an uncompressed streamed body is never refused for its size (70 MiB through the gate, past the 64 MiB decoding budget)', async () => {
    const chunk = Buffer.alloc(1 << 20);
    for (let i = 0; i < chunk.length; i++) chunk[i] = (i * 7) % 251;
    const gate = new KeyGate('application/octet-stream');
    let out = 0;
    for (let n = 0; n < 70; n++) for (const o of await gate.push(chunk)) out += o.length;
    for (const o of await gate.end()) out += o.length;
    expect(out).toBe(70 << 20);
  });
});
