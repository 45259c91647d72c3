// Regression tests from a review of the /v2 API and CLI (2026-11-28).
import { describe, expect, it } from 'vitest';
import { parseQuery, queryEncodingError } from '../../src/api/query.js';

describe('the /v2 query string parser', () => {
  it('reads a query as fastify did: + is a space, a name given twice a list, a name without = empty', () => {
    const q = parseQuery('consumer=Caf%C3%A9+team&a=1&a=2&flag&&=x&path=%2Fopen%2F%7Bid%7D');
    expect({ ...q }).toEqual({ consumer: 'Café team', a: ['1', '2'], flag: '', '': 'x', path: '/open/{id}' });
    expect(queryEncodingError(q)).toBeNull();
    expect({ ...parseQuery('') }).toEqual({});
  });

  it('a value whose escapes are not UTF-8 (Latin-1, a surrogate, a lone %) is 400 naming its parameter', () => {
    for (const [raw, param] of [
      ['consumer=Caf%E9', 'consumer'],
      ['limit=1&path=%2Fopen%2F%ED%A0%80', 'path'],
      ['label=100%', 'label'],
      ['route=a%2', 'route'],
    ] as const) {
      const e = queryEncodingError(parseQuery(raw));
      expect(e, raw).not.toBeNull();
      expect({ type: e?.type, status: e?.status, param: e?.param }, raw).toEqual({
        type: 'invalid_request',
        status: 400,
        param,
      });
    }
  });

  it('a name whose escapes are not UTF-8 is refused naming it as sent', () => {
    const e = queryEncodingError(parseQuery('Caf%E9=1'));
    expect(e?.param).toBe('Caf%E9');
    expect(e?.message).toMatch(/name/);
  });
});
