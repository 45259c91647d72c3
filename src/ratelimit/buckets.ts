import type { Policy } from './policy.js';

/** Any token bucket: tokens at time `t`, refilled at `p.rate` a millisecond up to `p.burst`. */
export interface Refillable {
  tokens: number;
  t: number;
  p: Pick<Policy, 'rate' | 'burst'>;
}

/** Adds the tokens earned since the bucket was last looked at, up to its capacity. */
export function refill(b: Refillable, now: number): void {
  if (now > b.t) {
    const t = b.tokens + (now - b.t) * b.p.rate;
    b.tokens = t > b.p.burst ? b.p.burst : t;
    b.t = now;
  }
}
