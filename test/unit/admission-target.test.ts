import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { codingProblem, FRAMING_REFUSED, toOriginForm } from '../../src/admission/target.js';

/** A request as the parser leaves it: its target, its raw header lines and the headers made from them. */
const req = (url: string, raw: string[], method = 'GET') => {
  const headers: Record<string, string> = {};
  for (let i = 0; i < raw.length; i += 2) headers[(raw[i] as string).toLowerCase()] = raw[i + 1] as string;
  return { url, method, rawHeaders: raw, headers } as unknown as IncomingMessage;
};

describe('toOriginForm (RFC 9112 §3.2.2)', () => {
  it('takes the path and query, and the authority as the one Host line', () => {
    const r = req('http://api.example:8080/v1/x?y=1', ['Host', 'sent.example', 'Accept', '*/*', 'host', 'twice']);
    toOriginForm(r);
    expect(r.url).toBe('/v1/x?y=1');
    expect(r.rawHeaders).toEqual(['Accept', '*/*', 'Host', 'api.example:8080']);
    expect(r.headers.host).toBe('api.example:8080');
  });

  it('an empty path is the root; a query alone is under it', () => {
    for (const [url, path] of [
      ['https://a.example', '/'],
      ['HTTP://a.example?q', '/?q'],
      ['http://[::1]:80/', '/'],
    ] as const) {
      const r = req(url, []);
      toOriginForm(r);
      expect(r.url, url).toBe(path);
    }
  });

  it('leaves as they came origin-form, CONNECT, other schemes, userinfo and invalid hosts', () => {
    for (const [url, method] of [
      ['/x', 'GET'],
      ['http://a.example/x', 'CONNECT'],
      ['ftp://a.example/x', 'GET'],
      ['http://u@a.example/x', 'GET'],
      ['http:///x', 'GET'],
      ['http://a b/x', 'GET'],
      ['*', 'OPTIONS'],
    ] as const) {
      const r = req(url, ['Host', 'h'], method);
      toOriginForm(r);
      expect(r.url, url).toBe(url);
      expect(r.rawHeaders, url).toEqual(['Host', 'h']);
    }
  });
});

describe('codingProblem (RFC 9112 §6.1, §6.3)', () => {
  it('chunked alone, in any case or with empty list elements, passes', () => {
    for (const te of [undefined, 'chunked', 'Chunked', ', chunked', 'chunked ,'])
      expect(codingProblem(te), te).toBeNull();
  });
  it('another coding before chunked is 501; no chunked last is 400, closing the connection', () => {
    expect(codingProblem('gzip, chunked')?.status).toBe(501);
    expect(codingProblem('gzip, chunked')?.param).toBe('transfer-encoding');
    expect(codingProblem('gzip')).toBe(FRAMING_REFUSED);
    expect(codingProblem('identity')).toBe(FRAMING_REFUSED);
    expect(FRAMING_REFUSED.status).toBe(400);
  });
});
