import http from 'node:http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { headerValue, passedValue } from '../../src/proxy/header-value.js';

/** Strings as a hostile store or client could hold them: any UTF-16 (lone surrogates too), controls, `%`, CR/LF. */
const anyString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 64 }),
  fc.string({
    unit: fc.constantFrom('%', '\r', '\n', '\t', ' ', '\0', '\x7f', '\u0085', '\ud800', '\udc00', 'é', '東', 'a'),
    maxLength: 32,
  }),
  fc.string({ unit: 'grapheme', maxLength: 32 }),
);

const accepted = (v: string): boolean => {
  try {
    http.validateHeaderValue('x-wakegate-consumer', v);
    return true;
  } catch {
    return false;
  }
};

describe('headerValue (the one encoder of header values from stored or client data)', () => {
  it('sends 東京チーム as UTF-8 percent-encoded, and visible ASCII without % unchanged (the same string)', () => {
    expect(headerValue('東京チーム')).toBe('%E6%9D%B1%E4%BA%AC%E3%83%81%E3%83%BC%E3%83%A0');
    const ascii = 'billing-service_01.~!$&*+=:@/?';
    expect(headerValue(ascii)).toBe(ascii);
    expect(headerValue('100%')).toBe('100%25');
    expect(headerValue('billing-service ')).toBe('billing-service%20');
    expect(headerValue('a\r\nx-admin: 1')).toBe('a%0D%0Ax-admin:%201');
    expect(headerValue('\ud800')).toBe('%EF%BF%BD');
  });

  it('fuzz: any string becomes a value Node sends, of visible ASCII only, that decodes back when well formed', () => {
    fc.assert(
      fc.property(anyString, (s) => {
        const v = headerValue(s);
        expect(accepted(v)).toBe(true);
        expect(v).toMatch(/^[\x21-\x7e]*$/);
        // A lone surrogate is sent as U+FFFD, as UTF-8 carries it.
        expect(decodeURIComponent(v)).toBe(Buffer.from(s, 'utf8').toString('utf8'));
        if (!/\p{Cs}/u.test(s)) expect(decodeURIComponent(v)).toBe(s);
      }),
      { numRuns: 5000 },
    );
  });

  it('fuzz: a passed-on value is kept when Node would send it, and is always sendable', () => {
    fc.assert(
      fc.property(anyString, (s) => {
        const v = passedValue(s);
        expect(accepted(v)).toBe(true);
        if (accepted(s)) expect(v).toBe(s);
      }),
      { numRuns: 5000 },
    );
  });

  it('allocates nothing for a visible-ASCII value: the very string comes back', () => {
    const s = `key_${'a'.repeat(20)}`;
    expect(Object.is(headerValue(s), s)).toBe(true);
    expect(Object.is(passedValue(s), s)).toBe(true);
  });
});
