import type { KeyRecord } from '../auth/key.js';

/** What a limiter says of one request. */
export interface LimitDecision {
  allowed: boolean;
  /** Response headers to add, as a flat raw array. */
  headers: string[];
  /** Seconds until a token is available (refused requests). */
  retryAfter: number;
  /** Name of the policy that refused the request. */
  policy: string | null;
  /** Refused because the fleet's Redis cannot answer (coordination.on_unavailable: closed): a 503. */
  unavailable?: boolean;
}

/**
 * The gateway's view of a rate limiter, called once per request. A lone gateway
 * decides at once; a fleet's may have to ask Redis first (a promise).
 */
export interface RequestLimiter {
  /**
   * `extraPolicy`: a route's or operation's own policy, drawn from as well as the key's bucket.
   * `clientIp` names the per-address bucket of a request with no key (addressBucket: an IPv6 client's /64).
   */
  check(
    key: KeyRecord | null,
    clientIp: string,
    extraPolicy: string | null,
    now: number,
  ): LimitDecision | Promise<LimitDecision>;
  /**
   * Draws a token for a request whose key is refused, per client address
   * (`unauthenticated` policy; `clientIp` as addressBucket names it). Allowed: within the
   * limit (answer 401, with the bucket's headers); else the 429.
   */
  refused(clientIp: string, now: number): LimitDecision | Promise<LimitDecision>;
}
