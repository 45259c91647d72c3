import type { Policy } from './policy.js';

/**
 * A clock step back larger than this (ms) takes a bucket's last-refill time back to now
 * (NTP correcting a fast clock): else the bucket would earn nothing until the clock got
 * back to it, an hour of 429s for a clock an hour fast. A smaller one is waited out, as
 * before: a thread's reading of the clock taken a moment before another's (the edge
 * threads share the table) must not earn the same refill twice.
 */
export const CLOCK_STEP_MS = 1_000;

/**
 * A bucket's last-refill time `t` as a refill at `now` leaves it: `now` when the clock was
 * stepped back past it by more than CLOCK_STEP_MS (the bucket refills from now on), else `t`.
 */
export const refilledFrom = (t: number, now: number): number => (t - now > CLOCK_STEP_MS ? now : t);

/** Any token bucket: tokens at time `t`, refilled at `p.rate` a millisecond up to `p.burst`. */
export interface Refillable {
  tokens: number;
  t: number;
  p: Pick<Policy, 'rate' | 'burst'>;
}

/**
 * Adds the tokens earned since the bucket was last looked at, up to its capacity. A
 * clock stepped back past `t` (by more than CLOCK_STEP_MS) takes `t` back to `now`, adding nothing.
 */
export function refill(b: Refillable, now: number): void {
  if (now > b.t) {
    const t = b.tokens + (now - b.t) * b.p.rate;
    b.tokens = t > b.p.burst ? b.p.burst : t;
    b.t = now;
  } else b.t = refilledFrom(b.t, now);
}
