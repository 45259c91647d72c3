import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { GatewayError } from '../errors.js';

/**
 * Opaque cursors: `cur_` + base64url of an HMAC tag and the keyset position with a
 * fingerprint of the filters it was made for. The tag is made under a key of this
 * installation (derived from its sealing key, so every instance of a fleet shares it),
 * so a client cannot make a cursor of its own: one this API did not issue, or one
 * altered, or one made for other filters, is refused (400, `param: cursor`) instead of
 * reaching the store or silently returning a wrong page.
 */
export interface CursorPosition {
  t: number;
  id: string;
}

/** The cursor key of an installation: derived from its sealing key, as the redaction key is. */
export const cursorKey = (sealingKey: Buffer): Buffer =>
  createHmac('sha256', sealingKey).update('wakegate cursor v1').digest();

export const filterFingerprint = (filters: Record<string, unknown>): string =>
  createHash('sha256').update(JSON.stringify(filters)).digest('base64url').slice(0, 12);

/** Bytes of the HMAC-SHA256 tag a cursor carries. */
const TAG = 16;
/** The latest position a cursor may hold: the end of year 9999 (what an ISO 8601 time can name). */
const MAX_T = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

const BAD = (why: string) => new GatewayError('invalid_request', `cursor: ${why}`, 'cursor');
const NOT_OURS = 'not a cursor this API issued (altered, or from before an upgrade): list again without cursor';

/** Makes and reads the cursors of one installation. */
export class Cursors {
  constructor(private readonly key: Buffer) {}

  private tag(body: Buffer): Buffer {
    return createHmac('sha256', this.key).update(body).digest().subarray(0, TAG);
  }

  encode(pos: CursorPosition, fingerprint: string): string {
    const body = Buffer.from(JSON.stringify([pos.t, pos.id, fingerprint]));
    return `cur_${Buffer.concat([this.tag(body), body]).toString('base64url')}`;
  }

  decode(cursor: string, fingerprint: string): CursorPosition {
    if (!/^cur_[A-Za-z0-9_-]{1,296}$/.test(cursor)) throw BAD(NOT_OURS);
    const raw = Buffer.from(cursor.slice(4), 'base64url');
    if (raw.length <= TAG) throw BAD(NOT_OURS);
    const body = raw.subarray(TAG);
    if (!timingSafeEqual(raw.subarray(0, TAG), this.tag(body))) throw BAD(NOT_OURS);
    let v: unknown;
    try {
      v = JSON.parse(body.toString('utf8'));
    } catch {
      throw BAD(NOT_OURS);
    }
    // Signed, so ours; still checked: whatever reaches the store is in range.
    if (
      !Array.isArray(v) ||
      v.length !== 3 ||
      !Number.isSafeInteger(v[0]) ||
      (v[0] as number) < 0 ||
      (v[0] as number) > MAX_T ||
      typeof v[1] !== 'string' ||
      !/^[a-z]+_[0-9A-Za-z]{1,40}$/.test(v[1]) ||
      typeof v[2] !== 'string'
    ) {
      throw BAD(NOT_OURS);
    }
    if (v[2] !== fingerprint)
      throw BAD('this cursor was made for other filters; send the same filters as the first page');
    return { t: v[0] as number, id: v[1] as string };
  }
}
