import { createHmac, timingSafeEqual } from 'node:crypto';

/** The secrets that sign besides the current one: one (or none, as '') or a list. */
const olderSecrets = (previous: string | readonly string[]): readonly string[] =>
  typeof previous === 'string' ? (previous ? [previous] : []) : previous;

/**
 * `x-service-signature: t=<unix seconds>,v1=<hex>`, where v1 is HMAC-SHA256 keyed
 * with the whole `whsec_…` secret over `<t>.<raw body>` (the Stripe scheme).
 */
export function sign(
  rawBody: string | Buffer,
  secret: string,
  unixSeconds: number,
  previous: string | readonly string[] = '',
): string {
  const mac = (k: string) => createHmac('sha256', k).update(`${unixSeconds}.`).update(rawBody).digest('hex');
  // During a secret's rotation the older secrets sign too, so receivers may switch when they like.
  return [`t=${unixSeconds}`, ...[secret, ...olderSecrets(previous)].map((k) => `v1=${mac(k)}`)].join(',');
}

/**
 * The Standard Webhooks signature (standardwebhooks.com, as `standardwebhooks` and
 * `svix` verify it): `v1,<base64 HMAC-SHA256>` over `<msg id>.<t>.<body>`, keyed with
 * the base64-decoded part of the secret after `whsec_`; space-separated when several
 * secrets sign.
 */
export function signStandard(
  rawBody: string | Buffer,
  msgId: string,
  unixSeconds: number,
  secret: string,
  previous: string | readonly string[] = '',
): string {
  const mac = (k: string) =>
    `v1,${createHmac('sha256', Buffer.from(k.slice(6), 'base64'))
      .update(`${msgId}.${unixSeconds}.`)
      .update(rawBody)
      .digest('base64')}`;
  return [secret, ...olderSecrets(previous)].map(mac).join(' ');
}

/**
 * A signing secret as the gateway makes them: `whsec_` and base64 of 32 bytes (a
 * secret of at least 16 characters after the prefix is taken). Anything else (an
 * empty variable, "undefined", the bare prefix) is a key anyone can sign with.
 */
const SECRET = /^whsec_[A-Za-z0-9+/=_-]{16,}$/;

/**
 * For receivers: true when `header` is a valid signature of `rawBody` (the bytes
 * as received, before any parsing) by `secret`, made within `toleranceSeconds` of
 * now. Any of several `v1=` values may match (secret rotation). False, never an
 * exception, for anything else: a secret that is not a `whsec_` secret, a body that
 * is not the raw bytes (a parsed object), a tolerance or clock that is not a number.
 */
export function verifySignature(
  rawBody: string | Buffer,
  header: string | null | undefined,
  secret: string,
  toleranceSeconds = 300,
  nowSeconds: number = Math.floor(Date.now() / 1000),
): boolean {
  if (typeof header !== 'string' || header.length > 4096) return false;
  if (typeof secret !== 'string' || !SECRET.test(secret)) return false;
  if (typeof rawBody !== 'string' && !ArrayBuffer.isView(rawBody)) return false;
  if (!Number.isFinite(toleranceSeconds) || toleranceSeconds < 0 || !Number.isFinite(nowSeconds)) return false;
  let t: number | null = null;
  const sigs: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const k = part.slice(0, eq).trim();
    const v = part.slice(eq + 1).trim();
    if (k === 't' && /^\d{1,12}$/.test(v)) t = Number(v);
    else if (k === 'v1' && /^[0-9a-f]{64}$/.test(v)) sigs.push(v);
  }
  if (t === null || sigs.length === 0) return false;
  if (!(Math.abs(nowSeconds - t) <= toleranceSeconds)) return false;
  const expected = Buffer.from(createHmac('sha256', secret).update(`${t}.`).update(rawBody).digest('hex'));
  return sigs.some((s) => timingSafeEqual(Buffer.from(s), expected));
}
