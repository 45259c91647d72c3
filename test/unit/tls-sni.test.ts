import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SniTable, type TlsMaterial } from '../../src/tls/material.js';
import { makeCerts, type Pair, type TestCerts } from '../helpers/certs.js';

/** SniTable.pick: the first certificate in list order whose names match; null stands for the first (the default). */
describe('SniTable', () => {
  let certs: TestCerts;
  let exact: Pair;
  let wild: Pair;
  let other: Pair;

  beforeAll(() => {
    certs = makeCerts();
    exact = certs.make('exact', 'api.example.test', ['DNS:api.example.test']);
    wild = certs.make('wild', 'wildcard', ['DNS:*.example.test']);
    other = certs.make('other-b', 'b.test', ['DNS:b.test']);
  });
  afterAll(() => certs?.cleanup());

  const table = (...pairs: Pair[]) => {
    const m: TlsMaterial = { certs: pairs.map((p) => ({ cert: p.certPem, key: p.keyPem })), ca: null, expiries: [] };
    return new SniTable(m, {});
  };

  it('a name the first certificate matches is the default (null), even when a later one matches too', () => {
    const t = table(exact, wild);
    expect(t.pick('api.example.test')).toBeNull();
    // Remembered: the same answer from the cache.
    expect(t.pick('api.example.test')).toBeNull();
    expect(t.pick('www.example.test')).not.toBeNull();
    expect(t.pick('unknown.test')).toBeNull();
  });

  it('list order decides, not how exact the match is: a first wildcard wins over a later exact name', () => {
    const t = table(wild, exact, other);
    expect(t.pick('api.example.test')).toBeNull();
    const b = t.pick('b.test');
    expect(b).not.toBeNull();
    expect(t.pick('b.test')).toBe(b);
  });

  it('one certificate: always the default', () => {
    expect(table(exact).pick('api.example.test')).toBeNull();
    expect(table(exact).pick('x.test')).toBeNull();
  });
});
