import type { EndpointRecord } from './records.js';

/** How long a secret rotated away keeps signing alongside the newer ones (each from its own rotation). */
export const SECRET_OVERLAP_MS = 24 * 3_600_000;

/**
 * At most this many secrets rotated away sign alongside the current one (five
 * signatures in all): a fifth rotation within 24 h ends the oldest one's overlap early.
 */
export const MAX_RETIRED_SECRETS = 4;

/** A secret rotated away, and when it stops signing. */
export interface RetiredSecret {
  secret: string;
  until: number;
}

type Retired = Pick<EndpointRecord, 'previous_secret' | 'previous_secret_until'>;

const isPair = (p: unknown): p is [string, number] =>
  Array.isArray(p) &&
  p.length === 2 &&
  typeof p[0] === 'string' &&
  p[0].startsWith('whsec_') &&
  typeof p[1] === 'number' &&
  Number.isFinite(p[1]);

/**
 * The secrets rotated away, newest first, as `previous_secret` holds them (sealed
 * in storage like the secret): '' for none; one `whsec_…` whose end is
 * `previous_secret_until` (a single rotation, the form every version reads); or,
 * when several overlap, a JSON array of `[secret, until ms]` pairs, newest first,
 * with `previous_secret_until` the latest end. A value that reads as neither signs nothing.
 */
export function retiredSecrets(e: Retired): RetiredSecret[] {
  const v = e.previous_secret;
  if (!v) return [];
  if (!v.startsWith('[')) return [{ secret: v, until: e.previous_secret_until ?? 0 }];
  try {
    const pairs: unknown = JSON.parse(v);
    if (!Array.isArray(pairs) || !pairs.every(isPair)) return [];
    return pairs.map(([secret, until]) => ({ secret, until }));
  } catch {
    return [];
  }
}

/** The fields that store `list` (newest first). */
export function storedRetired(list: readonly RetiredSecret[]): Retired {
  if (list.length === 0) return { previous_secret: '', previous_secret_until: null };
  const [only] = list;
  if (list.length === 1 && only) return { previous_secret: only.secret, previous_secret_until: only.until };
  return {
    previous_secret: JSON.stringify(list.map((r) => [r.secret, r.until])),
    previous_secret_until: Math.max(...list.map((r) => r.until)),
  };
}

/** The secrets rotated away that still sign at `nowMs`, newest first (the current one signs besides). */
export function stillSigning(e: Retired, nowMs: number): string[] {
  return retiredSecrets(e)
    .filter((r) => r.until > nowMs)
    .map((r) => r.secret);
}

/**
 * What rotate-secret stores: `fresh` signs from now on; the secret it replaces keeps
 * signing for SECRET_OVERLAP_MS, and so does every earlier one until its own overlap
 * ends, the newest MAX_RETIRED_SECRETS of them. `droppedEarly` counts those a full
 * list ended before their time.
 */
export function rotation(
  e: Pick<EndpointRecord, 'secret'> & Retired,
  fresh: string,
  nowMs: number,
): Pick<EndpointRecord, 'secret'> & Retired & { droppedEarly: number } {
  const live = [{ secret: e.secret, until: nowMs + SECRET_OVERLAP_MS }, ...retiredSecrets(e)].filter(
    (r) => r.until > nowMs,
  );
  const kept = live.slice(0, MAX_RETIRED_SECRETS);
  return { secret: fresh, ...storedRetired(kept), droppedEarly: live.length - kept.length };
}
