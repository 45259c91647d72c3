import { GatewayError } from '../errors.js';

/**
 * The query parameters (by the parsed query object) one of whose names or values has a
 * percent-escape that names no UTF-8 text (`%E9`, a surrogate `%ED%A0%80`, a lone `%`):
 * the first such name, as sent.
 */
const undecodable = new WeakMap<object, { key: string; inName: boolean }>();

const PLUS = /\+/g;

function decode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/**
 * The /v2 API's query string parser. It reads a query as fastify's default does (`+` is a
 * space, a name given twice is a list, a name without `=` is the empty text), except that a
 * name or value whose percent-escapes are not UTF-8 is not kept as its literal text: the call
 * is refused (queryEncodingError) naming it, as DESIGN.md's Errors say of a request shape
 * that is wrong.
 */
export function parseQuery(input: string): Record<string, string | string[]> {
  const result = Object.create(null) as Record<string, string | string[]>;
  if (input.length === 0) return result;
  for (const part of input.split('&')) {
    if (part.length === 0) continue;
    const eq = part.indexOf('=');
    const rawKey = (eq === -1 ? part : part.slice(0, eq)).replace(PLUS, ' ');
    const rawValue = eq === -1 ? '' : part.slice(eq + 1).replace(PLUS, ' ');
    const key = rawKey.includes('%') ? decode(rawKey) : rawKey;
    const value = rawValue.includes('%') ? decode(rawValue) : rawValue;
    if (key === null || value === null) {
      if (!undecodable.has(result)) undecodable.set(result, { key: key ?? rawKey, inName: key === null });
    }
    const k = key ?? rawKey;
    const v = value ?? rawValue;
    const cur = result[k];
    if (cur === undefined) result[k] = v;
    else if (Array.isArray(cur)) cur.push(v);
    else result[k] = [cur, v];
  }
  return result;
}

/** 400 invalid_request naming the query parameter parseQuery could not decode, if any. */
export function queryEncodingError(query: unknown): GatewayError | null {
  if (query === null || typeof query !== 'object') return null;
  const bad = undecodable.get(query);
  if (bad === undefined) return null;
  return new GatewayError(
    'invalid_request',
    bad.inName
      ? `${bad.key}: the parameter's name is not valid percent-encoded UTF-8`
      : `${bad.key}: is not valid percent-encoded UTF-8 (a percent-escape is malformed or names no UTF-8 text)`,
    bad.key,
  );
}
