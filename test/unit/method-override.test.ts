import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  isOverrideName,
  objectOverridesToWrite,
  overridesToWrite,
  pairsOverrideToWrite,
  rawOverridesToWrite,
} from '../../src/admission/override.js';

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** The reference: any comma element, trimmed of spaces and tabs, not empty and not a read. */
const reference = (v: string) =>
  v.split(',').some((e) => {
    const m = e.replace(/^[ \t]+|[ \t]+$/g, '').toUpperCase();
    return m !== '' && !READS.has(m);
  });

describe('method override headers', () => {
  it('names: the three headers, without case, `_` for `-`; nothing else', () => {
    for (const n of [
      'X-HTTP-Method-Override',
      'x-http-method',
      'X-Method-Override',
      'X_HTTP_METHOD_OVERRIDE',
      'x-http_method',
    ])
      expect(isOverrideName(n), n).toBe(true);
    for (const n of [
      'x-http-method-overrides',
      'http-method',
      'authorization',
      'x-http-methodx',
      'y-method-override',
      '',
    ])
      expect(isOverrideName(n), n).toBe(false);
  });

  it('values: a write anywhere in the list wins; empty elements are no method', () => {
    expect(overridesToWrite('DELETE')).toBe(true);
    expect(overridesToWrite('get, delete')).toBe(true);
    expect(overridesToWrite(' GET\t,\tHEAD , options')).toBe(false);
    expect(overridesToWrite('')).toBe(false);
    expect(overridesToWrite(' , ,')).toBe(false);
    expect(overridesToWrite('GET\u000b')).toBe(true);
    expect(overridesToWrite('[redacted:0123456789ab]')).toBe(true);
  });

  it('property: agrees with the reference on any list of methods, cases and whitespace', () => {
    const token = fc.oneof(
      fc.constantFrom('GET', 'get', 'Head', 'OPTIONS', 'DELETE', 'post', 'PUT', '', 'GETS', 'OPTION'),
      fc.string({ unit: fc.constantFrom('G', 'E', 'T', 'e', 't', ' ', '\t', 'X'), maxLength: 6 }),
    );
    fc.assert(
      fc.property(fc.array(token, { minLength: 1, maxLength: 4 }), (parts) => {
        const v = parts.join(',');
        expect(overridesToWrite(v), JSON.stringify(v)).toBe(reference(v));
      }),
      { numRuns: 2000 },
    );
  });

  it('every form headers come in: raw lines, pairs, an object with joined or listed values', () => {
    expect(rawOverridesToWrite(['Host', 'x', 'X-HTTP-Method-Override', 'GET', 'x-method-override', 'PATCH'])).toBe(
      true,
    );
    expect(rawOverridesToWrite(['Host', 'x', 'X-HTTP-Method-Override', 'GET'])).toBe(false);
    expect(rawOverridesToWrite([])).toBe(false);
    expect(pairsOverrideToWrite([['x-http-method', 'MERGE']])).toBe(true);
    expect(pairsOverrideToWrite(null)).toBe(false);
    expect(objectOverridesToWrite({ 'x-http-method-override': 'GET, DELETE' })).toBe(true);
    expect(objectOverridesToWrite({ 'x-method-override': ['GET', 'put'] })).toBe(true);
    expect(objectOverridesToWrite({ host: 'x', 'x-http-method': 'head' })).toBe(false);
  });
});
