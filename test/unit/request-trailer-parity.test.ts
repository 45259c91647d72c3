// A client's request trailers are filtered as its headers are: every field the header rules keep from an untrusted client's origin request, the trailer rules keep from it too (2026-11-28).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { connectionTokens, forwardRequestHeaders, HOP_BY_HOP } from '../../src/proxy/headers.js';
import { forwardRequestTrailers } from '../../src/proxy/trailers.js';

/**
 * The class of the review's finding (X-Real-IP and fields the request's Connection names
 * passed as trailers while the headers dropped them): for any set of field names, in any
 * case and with `_` for `-`, and any Connection header naming some of them, a name the
 * header rules drop for a client that is no trusted proxy is dropped by the trailer rules.
 */
const spelling = (n: string) =>
  fc
    .array(fc.constantFrom('as is', 'upper', 'underscore'), { minLength: n.length, maxLength: n.length })
    .map((how) =>
      [...n].map((c, i) => (how[i] === 'upper' ? c.toUpperCase() : how[i] === 'underscore' && c === '-' ? '_' : c)),
    )
    .map((cs) => cs.join(''));

const known = fc
  .constantFrom(
    'x-wakegate-key-id',
    'x-wakegate-consumer',
    'x-forwarded-for',
    'x-forwarded-proto',
    'x-forwarded-host',
    'forwarded',
    'x-real-ip',
    'authorization',
    'proxy-authorization',
    'host',
    ...HOP_BY_HOP,
    'x-request-id',
    'x-checksum',
    'grpc-status',
    'x-custom-hop',
  )
  .chain(spelling);
const other = fc.stringMatching(/^[a-z][a-z0-9_-]{0,15}$/).chain(spelling);

describe('request trailers and headers, filtered alike', () => {
  it('property: a field the headers drop (untrusted client) never passes as a trailer', () => {
    fc.assert(
      fc.property(
        // A Connection among the fields would name others in the head only (as a trailer it is dropped, naming nothing).
        fc.uniqueArray(
          fc.oneof(known, other).filter((n) => n.toLowerCase() !== 'connection'),
          { minLength: 1, maxLength: 8, selector: (n) => n.toLowerCase() },
        ),
        fc.array(fc.oneof(known, other), { maxLength: 3 }),
        (names, connectionNames) => {
          const fields = names.flatMap((n) => [n, 'v']);
          const connection = connectionNames.length > 0 ? ['Connection', connectionNames.join(', ')] : [];
          const head = forwardRequestHeaders([...connection, ...fields], {
            dropAuthorization: false,
            clientIp: '10.0.0.1',
            clientTrusted: false,
            proto: 'http',
            originHost: 'origin',
            identity: null,
          });
          const kept = new Set(head.filter((_, i) => i % 2 === 0));
          const trailers = forwardRequestTrailers(fields, connectionTokens(connection)) ?? [];
          const label = JSON.stringify({ names, connectionNames, head, trailers });
          for (let i = 0; i < trailers.length; i += 2) expect(kept.has(trailers[i] as string), label).toBe(true);
        },
      ),
      { numRuns: 3000 },
    );
  });
});
