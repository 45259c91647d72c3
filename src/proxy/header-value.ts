/**
 * The one encoder for header values the gateway writes from stored or client data
 * (identity headers, replay headers, tunnel and trailer requests): `%` and every
 * byte outside visible ASCII (0x21-0x7E, RFC 5234 VCHAR) are percent-encoded as
 * UTF-8, so `東京チーム` is sent as `%E6%9D%B1...` and an origin reads it back
 * with `decodeURIComponent`. Whatever is stored, the value passes Node's and
 * undici's header checks (no response can fail on it) and has no whitespace or
 * control byte an HTTP parser could trim or split on (`billing-service ` arrives
 * as `billing-service%20`, never as `billing-service`).
 */

/** `%XX` of every byte, made once. */
const HEX: string[] = Array.from({ length: 256 }, (_, b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`);

const plain = (c: number): boolean => c > 0x20 && c < 0x7f && c !== 0x25;

/**
 * `s` encoded for a header value. A value of visible ASCII without `%` (the usual
 * key id, consumer and environment) is returned as it is, with nothing allocated.
 * A lone surrogate, which no UTF-8 can carry, is sent as U+FFFD (`%EF%BF%BD`).
 */
export function headerValue(s: string): string {
  for (let i = 0; i < s.length; i++) {
    if (!plain(s.charCodeAt(i))) return encodeFrom(s, i);
  }
  return s;
}

function encodeFrom(s: string, start: number): string {
  let out = s.slice(0, start);
  const bytes = Buffer.from(start === 0 ? s : s.slice(start), 'utf8');
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i] as number;
    out += plain(b) ? String.fromCharCode(b) : (HEX[b] as string);
  }
  return out;
}

/**
 * A header value passed on as it was captured (a replayed request's headers): kept
 * as it is when Node would send it (tab, SP, visible ASCII and obs-text bytes, RFC
 * 9110 §5.5), else encoded as `headerValue` does, so a stored value that could
 * never have come off the wire cannot make the request fail.
 */
export function passedValue(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f || c > 0xff) return headerValue(s);
  }
  return s;
}
