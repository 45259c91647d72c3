import type { DeliveryRecord } from './records.js';

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

/**
 * The longest wait (ms) the schedule can put before any attempt: its longest step with
 * the most jitter, or the longest Retry-After (a day), whichever is longer. A due time
 * further ahead than this from now was set while the clock was ahead.
 */
export function longestWait(scheduleS: readonly number[], jitter: number): number {
  return Math.max(MAX_RETRY_AFTER_S * 1000, Math.ceil(Math.max(0, ...scheduleS) * 1000 * (1 + jitter)));
}

/**
 * The wait (ms) that put `d`'s next attempt where it is: what its last attempt's outcome
 * was given (its due time less that attempt's time, both read from the same clock), else
 * the longest the schedule could have given it (none before a first attempt; the step with
 * the most jitter, or a day after a 429 or 503 that may have carried a Retry-After). A
 * due time set while the clock was ahead is put this far from now: never sooner than the
 * schedule would have made the attempt with a correct clock.
 */
export function waitBefore(d: DeliveryRecord, scheduleS: readonly number[], jitter: number): number {
  if (d.attempt === 0) return 0;
  const step = Math.ceil(scheduledWait(d.attempt + 1, scheduleS) * (1 + jitter));
  const most = d.response_status === 429 || d.response_status === 503 ? Math.max(step, MAX_RETRY_AFTER_S * 1000) : step;
  const log = d.attempt_log;
  if (log !== undefined && log.attempt === d.attempt && d.next_attempt_at !== null)
    return Math.min(most, Math.max(0, d.next_attempt_at - log.at));
  return most;
}

/** Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(v: string | undefined, nowMs: number): number | null {
  if (!v) return null;
  if (/^\d+$/.test(v.trim())) return Number(v.trim());
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : Math.max(0, Math.ceil((t - nowMs) / 1000));
}
