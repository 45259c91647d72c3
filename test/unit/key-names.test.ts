import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkName, consumerFold } from '../../src/auth/key.js';
import { headerValue } from '../../src/proxy/header-value.js';

const names = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({
    unit: fc.constantFrom(
      'a',
      'B',
      ' ',
      '%',
      '\t',
      '\u00a0',
      '\u200b',
      'e\u0301',
      'é',
      'ß',
      'ſ',
      '\u212a',
      '東',
      '\ud800',
    ),
    maxLength: 20,
  }),
);

describe('key names (label, consumer)', () => {
  it('property: an accepted name is NFC, stable, and what an origin reads back from the header', () => {
    fc.assert(
      fc.property(names, (s) => {
        const r = checkName(s);
        if ('problem' in r) return;
        const { name } = r;
        expect(name).toBe(s.normalize('NFC'));
        expect(checkName(name)).toEqual({ name });
        const header = headerValue(name);
        // Nothing a parser trims or splits on, and the decoded value is the name itself.
        expect(header).toMatch(/^[\x21-\x7e]+$/);
        expect(decodeURIComponent(header)).toBe(name);
        expect(name.trim()).toBe(name);
      }),
      { numRuns: 20_000 },
    );
  });

  it('folds case and normalization: one identity, however it is written', () => {
    const same = ['billing-service', 'Billing-Service', 'BILLING-SERVICE', 'billing-ſervice', 'billing-service '];
    for (const s of same) expect(consumerFold(s)).toBe('billing-service');
    expect(consumerFold('Cafe\u0301')).toBe(consumerFold('CAFÉ'));
    expect(consumerFold('Straße')).toBe(consumerFold('STRASSE'));
    expect(consumerFold('\u212aelvin')).toBe('kelvin');
    expect(consumerFold('billing-service-2')).not.toBe('billing-service');
  });
});
