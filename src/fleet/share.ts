import { headersFor, refusal } from '../ratelimit/limiter.js';
import type { Policy } from '../ratelimit/policy.js';
import type { LimitDecision } from '../ratelimit/types.js';

/**
 * One bucket enforced by this instance alone while Redis cannot answer
 * (on_unavailable: local): its share of the fleet's bucket, the rate and burst
 * divided by the instances seen alive, so the fleet admits about what one bucket
 * would. It starts from this instance's share of what the shared bucket last held.
 */
export interface ShareBucket {
  /** The policy at this instance's share (limit, burst and rate divided), for the headers. */
  policy: Policy;
  /** Instances the share was cut for. */
  of: number;
  tokens: number;
  /** When tokens was brought up to date (local monotonic ms). */
  at: number;
}

/** `p` divided among `n` instances (never below one token of burst). */
export function sharePolicy(p: Policy, n: number): Policy {
  if (n <= 1) return p;
  return {
    ...p,
    limit: Math.max(1, Math.floor(p.limit / n)),
    burst: Math.max(1, p.burst / n),
    rate: p.rate / n,
  };
}

/**
 * The share bucket of a policy, made (from `left`, what the shared bucket last held)
 * or cut again when the count of instances changed, and refilled to `t`.
 */
export function shareOf(s: ShareBucket | null, p: Policy, n: number, left: number, t: number): ShareBucket {
  if (s === null || s.of !== n || s.policy.name !== p.name) {
    const policy = sharePolicy(p, n);
    const start = Math.max(0, Math.min(policy.burst, left / n));
    // A new cut keeps what this instance had left of the old one, when that is less.
    const tokens = s === null ? start : Math.min(start, refilled(s, t));
    return { policy, of: n, tokens, at: t };
  }
  s.tokens = refilled(s, t);
  s.at = t;
  return s;
}

const refilled = (s: ShareBucket, t: number): number =>
  Math.min(s.policy.burst, s.tokens + Math.max(0, t - s.at) * s.policy.rate);

/** Whether the bucket holds a whole token (a hair under one counts, as in the shared bucket). */
const hasToken = (s: ShareBucket): boolean => s.tokens >= 1 - 1e-9;

/** A decision on one or two share buckets, all or nothing (a token from each, or none), with their headers. */
export function shareDecision(s1: ShareBucket, s2: ShareBucket | null): LimitDecision {
  if (hasToken(s1) && (s2 === null || hasToken(s2))) {
    s1.tokens--;
    if (s2 !== null) s2.tokens--;
    const headers =
      s2 === null
        ? headersFor(s1.policy, s1.tokens, null, 0, false)
        : headersFor(s1.policy, s1.tokens, s2.policy, s2.tokens, s2.tokens < s1.tokens);
    return { allowed: true, headers, retryAfter: 0, policy: null };
  }
  if (s2 === null) return refusal(s1.policy, s1.tokens, null, 0, false);
  return refusal(s1.policy, s1.tokens, s2.policy, s2.tokens, hasToken(s1));
}
