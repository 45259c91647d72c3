/**
 * Milliseconds to wait before attempt `next` (2..n), from the schedule of waits
 * before attempts 2..8, spread by ±jitter. A receiver's Retry-After (seconds, on
 * 429/503) may lengthen the wait, never shorten it; it is capped at a day.
 */
export function retryDelay({
  next,
  scheduleS,
  jitter,
  random = Math.random,
  retryAfterS = null,
}: {
  next: number;
  scheduleS: readonly number[];
  jitter: number;
  random?: () => number;
  retryAfterS?: number | null;
}): number {
  const base = (scheduleS[Math.min(next - 2, scheduleS.length - 1)] ?? 0) * 1000;
  const spread = base * jitter * (2 * random() - 1);
  const wait = Math.max(0, Math.round(base + spread));
  if (retryAfterS !== null && retryAfterS > 0) return Math.max(wait, Math.min(retryAfterS, 86_400) * 1000);
  return wait;
}

/** Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(v: string | undefined, nowMs: number): number | null {
  if (!v) return null;
  if (/^\d+$/.test(v.trim())) return Number(v.trim());
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : Math.max(0, Math.ceil((t - nowMs) / 1000));
}
