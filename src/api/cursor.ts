import { createHash } from 'node:crypto';
import { GatewayError } from '../errors.js';

/**
 * Opaque cursors: `cur_` + base64url of the keyset position and a fingerprint of
 * the filters it was made for, so a cursor replayed with other filters, or in
 * another environment, is refused instead of silently returning a wrong page.
 */
export interface CursorPosition {
  t: number;
  id: string;
}

export const filterFingerprint = (filters: Record<string, unknown>): string =>
  createHash('sha256').update(JSON.stringify(filters)).digest('base64url').slice(0, 12);

export function encodeCursor(pos: CursorPosition, fingerprint: string): string {
  return `cur_${Buffer.from(JSON.stringify([pos.t, pos.id, fingerprint])).toString('base64url')}`;
}

const BAD = (why: string) => new GatewayError('invalid_request', `cursor: ${why}`, 'cursor');

export function decodeCursor(cursor: string, fingerprint: string): CursorPosition {
  if (!cursor.startsWith('cur_') || cursor.length > 300) throw BAD('not a cursor this API issued');
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(cursor.slice(4), 'base64url').toString('utf8'));
  } catch {
    throw BAD('not a cursor this API issued');
  }
  if (
    !Array.isArray(v) ||
    v.length !== 3 ||
    !Number.isSafeInteger(v[0]) ||
    typeof v[1] !== 'string' ||
    !/^[a-z]+_[0-9A-Za-z]{1,40}$/.test(v[1]) ||
    typeof v[2] !== 'string'
  ) {
    throw BAD('not a cursor this API issued');
  }
  if (v[2] !== fingerprint)
    throw BAD('this cursor was made for other filters; send the same filters as the first page');
  return { t: v[0] as number, id: v[1] as string };
}
