// Review of `wakegate/verify`: a property over what an attacker can put in x-service-signature.
// Passing: it records what held (parsing, binding of <t>.<body>, the window both ways, no throw
// for string/Buffer bodies), which the unit test in test/unit/webhooks.test.ts checks only by example.
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sign, verifySignature } from '../../src/verify.js';

const NOW = 1_795_000_000;
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const OTHER = `whsec_${randomBytes(32).toString('base64')}`;

describe('verifySignature against attacker-made headers', () => {
  it('never throws and never accepts a body with signatures made for other bodies, times or secrets', () => {
    const target = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
    );
    // Signatures the attacker has seen: the target body at a time outside the window (either
    // side), other bodies (delimiter games: '<digits>.' + body, body minus/plus a byte,
    // a BOM, the same text as UTF-8 vs Latin-1) inside the window, or another secret's.
    const stale = fc.oneof(fc.integer({ min: 301, max: 10_000_000 }), fc.integer({ min: -10_000_000, max: -301 }));
    const t = fc.integer({ min: -300, max: 300 }).map((d) => NOW + d);
    const fragments = (body: string | Buffer) => {
      const bytes = Buffer.from(body);
      const others = [
        Buffer.concat([Buffer.from('1.'), bytes]),
        Buffer.concat([Buffer.from(`${NOW}.`), bytes]),
        Buffer.concat([bytes, Buffer.from(' ')]),
        bytes.subarray(1),
        Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]),
        Buffer.from(bytes.toString('latin1'), 'utf8'),
      ].filter((b) => !b.equals(bytes));
      const sigOf = (h: string) => h.split(',').slice(1);
      return fc.oneof(
        stale.map((d) => [`t=${NOW + d}`, ...sigOf(sign(body, SECRET, NOW + d))]),
        fc.tuple(fc.constantFrom(...others), t).map(([b, tt]) => [`t=${tt}`, ...sigOf(sign(b, SECRET, tt))]),
        t.map((tt) => [`t=${tt}`, ...sigOf(sign(body, OTHER, tt))]),
        stale.map((d) => [`t=0${NOW + d}`, `t= ${NOW + d}`, `t=${NOW + d}.0`, `t=+${NOW}`, `t=${NOW}e0`]),
        fc.constantFrom(['', ' ', 'v1=', 'v1,', 'v2=', 'v1a=', '=', 't=', 'v1=x'], [`v1=${'0'.repeat(64)}`]),
        fc.string({ maxLength: 20 }).map((s) => [s]),
      );
    };
    fc.assert(
      fc.property(
        target.chain((body) =>
          fc.tuple(
            fc.constant(body),
            fc
              .array(fragments(body), { minLength: 1, maxLength: 6 })
              .chain((groups) => fc.shuffledSubarray(groups.flat(), { minLength: 1 })),
            fc.constantFrom(',', ', ', ' ,', ',,'),
          ),
        ),
        ([body, parts, sep]) => {
          let verdict: unknown;
          expect(() => {
            verdict = verifySignature(body, parts.join(sep), SECRET, 300, NOW);
          }).not.toThrow();
          expect(verdict).toBe(false);
        },
      ),
      { numRuns: 400 },
    );
    // And the genuine one still verifies, with a stale and a foreign signature beside it.
    const body = '{"id":"evt_1"}';
    expect(verifySignature(body, `${sign(body, SECRET, NOW - 300, OTHER)}, t=junk, v2=x`, SECRET, 300, NOW)).toBe(true);
  });
});
