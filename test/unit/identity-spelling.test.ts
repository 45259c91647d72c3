import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forwardRequestHeaders, HOP_BY_HOP, spellsOwn } from '../../src/proxy/headers.js';

/** A field name as nginx (underscores_in_headers), CGI/PHP, Django or Rack read it: `_` as `-`, any case. */
const folded = (name: string): string => name.toLowerCase().replace(/_/g, '-');
const gatewaySet = (name: string): boolean => {
  const f = folded(name);
  return f.startsWith('x-wakegate-') || f.startsWith('x-forwarded-') || f === 'forwarded';
};

/** Any spelling of `n` a folding origin reads as `n`: each letter in either case, each `-` possibly `_`. */
const spelling = (n: string) =>
  fc
    .array(fc.constantFrom('as is', 'upper', 'underscore'), { minLength: n.length, maxLength: n.length })
    .map((how) =>
      [...n].map((c, i) => (how[i] === 'upper' ? c.toUpperCase() : how[i] === 'underscore' && c === '-' ? '_' : c)),
    )
    .map((cs) => cs.join(''));

const owned = fc
  .constantFrom(
    'x-wakegate-key-id',
    'x-wakegate-consumer',
    'x-wakegate-environment',
    'x-wakegate-replay-of',
    'x-wakegate-replayed-by',
    'x-forwarded-for',
    'x-forwarded-proto',
    'x-forwarded-host',
    'forwarded',
  )
  .chain(spelling);

/** Names that are not the gateway's (nor hop-by-hop, Host or Authorization), with underscores where a token allows them. */
const other = fc
  .stringMatching(/^[a-z0-9_-]{1,24}$/)
  .filter((n) => !gatewaySet(n) && !HOP_BY_HOP.has(n) && n !== 'host' && n !== 'authorization')
  .chain(spelling);

describe('a client field an origin may fold to a gateway-set name never passes (forwardRequestHeaders)', () => {
  it('whatever its spelling, trusted proxy or not, with a key or without; every other field passes as sent', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            owned.map((n) => [n, 'spoof'] as const),
            other.map((n) => [n, 'plain'] as const),
          ),
          {
            maxLength: 8,
          },
        ),
        fc.boolean(),
        fc.boolean(),
        (fields, trusted, keyed) => {
          const raw = ['Accept', '*/*', ...fields.flat()];
          const out = forwardRequestHeaders(raw, {
            dropAuthorization: keyed,
            clientIp: '10.0.0.1',
            clientTrusted: trusted,
            proto: 'https',
            originHost: 'origin',
            identity: keyed ? ['key_real', 'billing', 'production'] : null,
          });
          const label = JSON.stringify([fields, trusted, keyed, out]);
          for (let i = 0; i < out.length; i += 2) {
            const n = out[i] as string;
            // No name the origin gets folds to a gateway-set one unless it is in the gateway's own spelling.
            if (gatewaySet(n)) expect(n, label).not.toContain('_');
            // A client's value passes only as a trusted proxy's X-Forwarded-* or Forwarded, as sent.
            if ((out[i + 1] as string).includes('spoof')) {
              expect(trusted, label).toBe(true);
              expect(/^(x-forwarded-|forwarded$)/i.test(n), label).toBe(true);
            }
          }
          // Fields that are not the gateway's pass as they came, in order.
          const sent = fields.filter(([n]) => !gatewaySet(n)).flat();
          const passed = out.filter((_, i) => i % 2 === 0 && !gatewaySet(out[i] as string) && out[i] !== 'Host');
          expect(passed, label).toEqual(['Accept', ...sent.filter((_, i) => i % 2 === 0)]);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('spellsOwn: a name with `_` for a `-` of x-wakegate-* or x-forwarded-*, any case already folded', () => {
    for (const n of ['x_wakegate_consumer', 'x-wakegate_key-id', 'x_forwarded-for', 'x_wakegate_', 'x-forwarded_'])
      expect(spellsOwn(n), n).toBe(true);
    for (const n of ['x_wakegatex', 'x_forwarded', 'x_request_id', 'y_wakegate_consumer', 'x_wakegat', ''])
      expect(spellsOwn(n), n).toBe(false);
  });
});
