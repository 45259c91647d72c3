import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { carriesGatewayKey, forwardRequestHeaders } from '../../src/proxy/headers.js';
import { spelledWord } from '../helpers/key-spellings.js';

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
    .constantFrom('svc_live_', 'svc_test_')
    .map((p) => `${p}${newSecret()}`)
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
