/** The longest wait a Retry-After may ask for (s), whatever the schedule. */
const MAX_RETRY_AFTER_S = 86_400;

/** The schedule's wait (ms, before jitter) before attempt `next` (2..n). */
const scheduledWait = (next: number, scheduleS: readonly number[]): number =>
  (scheduleS[Math.min(next - 2, scheduleS.length - 1)] ?? 0) * 1000;

/**
 * When the schedule puts a delivery's last attempt (jitter aside): `createdAt` plus
 * every wait before attempts 2..maxAttempts. A receiver's Retry-After never moves an
 * attempt later than this.
 */
export function scheduleEnd(createdAt: number, maxAttempts: number, scheduleS: readonly number[]): number {
  let end = createdAt;
  for (let n = 2; n <= maxAttempts; n++) end += scheduledWait(n, scheduleS);
  return end;
}

/**
 * Milliseconds to wait before attempt `next` (2..n), from the schedule of waits
 * before attempts 2..8, spread by ±jitter. A receiver's Retry-After (seconds, on
 * 429/503) may lengthen this one wait, never shorten it: up to `latestMs` (what is
 * left until the schedule's end, see scheduleEnd) and at most a day. The waits after
 * it are the schedule's own.
 */
export function retryDelay({
  next,
  scheduleS,
  jitter,
  random = Math.random,
  retryAfterS = null,
  latestMs = Number.POSITIVE_INFINITY,
}: {
  next: number;
  scheduleS: readonly number[];
  jitter: number;
  random?: () => number;
  retryAfterS?: number | null;
  /** The longest a Retry-After may make this wait: until the schedule's end. */
  latestMs?: number;
}): number {
  const base = scheduledWait(next, scheduleS);
  const spread = base * jitter * (2 * random() - 1);
  const wait = Math.max(0, Math.round(base + spread));
  if (retryAfterS !== null && retryAfterS > 0)
    return Math.max(wait, Math.min(Math.min(retryAfterS, MAX_RETRY_AFTER_S) * 1000, latestMs));
  return wait;
}

/** Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(v: string | undefined, nowMs: number): number | null {
  if (!v) return null;
  if (/^\d+$/.test(v.trim())) return Number(v.trim());
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : Math.max(0, Math.ceil((t - nowMs) / 1000));
}
