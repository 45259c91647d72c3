import { describe, expect, it } from 'vitest';
import { ViaValues, viaName } from '../../src/admission/via.js';

describe('the gateway’s Via name', () => {
  const key = Buffer.alloc(32, 7);
  const v = new ViaValues(viaName(key));

  it('is the same for the same sealing key, another for another', () => {
    expect(v.name).toMatch(/^wakegate-[0-9a-f]{8}$/);
    expect(viaName(Buffer.alloc(32, 7))).toBe(v.name);
    expect(viaName(Buffer.alloc(32, 8))).not.toBe(v.name);
  });

  it('says the client’s version: 1.1, 1.0, and 2 for HTTP/2', () => {
    expect(v.of(1, 1)).toBe(`1.1 ${v.name}`);
    expect(v.of(1, 0)).toBe(`1.0 ${v.name}`);
    expect(v.of(2, 0)).toBe(`2 ${v.name}`);
  });

  it('sees itself in a Via list, in any case, and nothing else', () => {
    expect(v.passed(undefined)).toBe(false);
    expect(v.passed('1.1 corp-proxy')).toBe(false);
    expect(v.passed(`1.1 corp-proxy, 1.1 ${v.name}`)).toBe(true);
    expect(v.passed(`1.0 ${v.name.toUpperCase()}`)).toBe(true);
    expect(v.passed(`1.1 ${viaName(Buffer.alloc(32, 8))}`)).toBe(false);
  });
});
