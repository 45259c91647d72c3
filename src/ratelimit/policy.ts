import type { RateLimitPolicy, RateWindow } from '../config/index.js';

export const WINDOW_MS: Record<RateWindow, number> = {
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
};

/** A policy ready for arithmetic. */
export interface Policy {
  name: string;
  /** Requests per window (as configured, divided among instances). */
  limit: number;
  /** Bucket capacity. */
  burst: number;
  windowMs: number;
  /** Tokens added per millisecond. */
  rate: number;
  shared: boolean;
  /** `"name";q=limit;w=seconds`, for RateLimit-Policy. */
  header: string;
}

/**
 * Each instance enforces its share: limit and burst divided by the instance
 * count (rounded up, at least 1). With N instances behind a balancer that spreads
 * a client's requests evenly this approximates the global limit; a client pinned
 * to one instance gets only 1/N of it.
 */
export function makePolicy(
  name: string,
  p: Pick<RateLimitPolicy, 'limit' | 'burst' | 'window'> & { shared?: boolean },
  instances = 1,
): Policy {
  const windowMs = WINDOW_MS[p.window];
  const limit = Math.max(1, Math.ceil(p.limit / instances));
  const burst = Math.max(1, Math.ceil(p.burst / instances));
  return {
    name,
    limit,
    burst,
    windowMs,
    rate: limit / windowMs,
    shared: p.shared ?? false,
    header: `"${name}";q=${limit};w=${windowMs / 1000}`,
  };
}
