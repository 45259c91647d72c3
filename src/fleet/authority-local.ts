import type { KeyRecord } from '../auth/key.js';
import type { LimitDecision, RequestLimiter } from '../ratelimit/types.js';

/**
 * Redis is not trusted with authority (DESIGN): whoever writes to it may miscount
 * the fleet's buckets, never lock out the admin. A key that holds `keys:write` (the
 * authority to revoke and issue keys: the bootstrap admin and those it made alike)
 * is limited by this instance alone, at its whole policy, in memory; every other
 * bucket is the fleet's. A fleet of N instances admits such a key at most N times
 * its rate.
 */
export class AuthorityLocal implements RequestLimiter {
  constructor(
    private readonly fleet: RequestLimiter,
    private readonly local: RequestLimiter,
  ) {}

  check(
    key: KeyRecord | null,
    clientIp: string,
    extraPolicy: string | null,
    now: number,
  ): LimitDecision | Promise<LimitDecision> {
    if (key?.scopes.includes('keys:write')) return this.local.check(key, clientIp, extraPolicy, now);
    return this.fleet.check(key, clientIp, extraPolicy, now);
  }

  refused(clientIp: string, now: number): LimitDecision | Promise<LimitDecision> {
    return this.fleet.refused(clientIp, now);
  }
}
