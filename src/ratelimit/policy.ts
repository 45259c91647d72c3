import { bucketOf, type KeyRecord } from '../auth/key.js';
import type { Config, RateLimitPolicy, RateWindow } from '../config/index.js';

export const WINDOW_MS: Record<RateWindow, number> = {
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
};

/** A policy ready for arithmetic. */
export interface Policy {
  name: string;
  /** Requests per window. */
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

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v > 0;

/**
 * Why `p` is no policy to count with, or null when it is one: `limit` and `burst`
 * finite positive numbers and `window` one of WINDOW_MS's own names (never a member
 * of Object.prototype). A NaN or infinite rate would let every request through.
 */
export function rateLimitProblem(p: unknown): string | null {
  if (typeof p !== 'object' || p === null || Array.isArray(p)) return 'must be {limit, burst, window}';
  const { limit, burst, window } = p as Record<string, unknown>;
  if (!isCount(limit)) return 'limit must be a finite positive number';
  if (!isCount(burst)) return 'burst must be a finite positive number';
  if (typeof window !== 'string' || !Object.hasOwn(WINDOW_MS, window)) {
    return `window must be one of ${Object.keys(WINDOW_MS).join(', ')}`;
  }
  return null;
}

/**
 * A configured policy, ready for arithmetic (a fleet shares one bucket through Redis, never a split).
 * Throws a RangeError for values that are no policy (rateLimitProblem).
 */
export function makePolicy(
  name: string,
  p: Pick<RateLimitPolicy, 'limit' | 'burst' | 'window'> & { shared?: boolean },
): Policy {
  const problem = rateLimitProblem(p);
  if (problem !== null) throw new RangeError(`rate limit policy ${JSON.stringify(name)}: ${problem}`);
  const windowMs = WINDOW_MS[p.window];
  const { limit, burst } = p;
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

const UNAUTH_DEFAULT = { limit: 600, burst: 600, window: 'minute' } as const;

/** The buckets one request draws from: its key's (or address's) and, maybe, its route's. */
export interface Choice {
  p1: Policy;
  /** The bucket's kind ('a' address, 'k' key, 's' shared) and its id within the kind. */
  tag1: string;
  id1: string;
  /** A test-class key: its bucket is the shared sandbox one. */
  test: boolean;
  p2: Policy | null;
  tag2: string;
  id2: string;
}

export const emptyChoice = (p: Policy): Choice => ({
  p1: p,
  tag1: '',
  id1: '',
  test: false,
  p2: null,
  tag2: '',
  id2: '',
});

/**
 * The configured policies, and which buckets a request draws from per DESIGN.md:
 * its key's own rate_limit, else `default`; every test-class key the one shared
 * `sandbox` bucket; a route or operation with its own policy that policy's bucket
 * too; an unkeyed request its client address's. A key's buckets are named by
 * bucketOf: a rotated key's are those of the first key of its replacement chain.
 */
export class PolicySet {
  private readonly policies = new Map<string, Policy>();
  private readonly keyPolicies = new WeakMap<KeyRecord, Policy>();
  /** Each route policy's bucket name prefix, made once. */
  private readonly tags = new Map<string, string>();
  private readonly testEnvs = new Set<string>();
  readonly unauth: Policy;
  readonly def: Policy;
  readonly sandbox: Policy;

  constructor(cfg: Pick<Config, 'rate_limits' | 'environments'>) {
    for (const [name, p] of Object.entries(cfg.rate_limits)) {
      this.policies.set(name, makePolicy(name, p));
      this.tags.set(name, `x${name}\u0000`);
    }
    this.def = this.policies.get('default') as Policy;
    this.sandbox = this.policies.get('sandbox') as Policy;
    this.unauth = this.policies.get('unauthenticated') ?? makePolicy('unauthenticated', UNAUTH_DEFAULT);
    for (const [name, e] of Object.entries(cfg.environments)) if (e.class === 'test') this.testEnvs.add(name);
  }

  get(name: string): Policy | undefined {
    return this.policies.get(name);
  }

  /**
   * A key's own policy, else `default`. A stored rate_limit that makes no policy (one
   * kept before such values were refused, e.g. `{}`) counts as none: `default`.
   */
  private keyPolicy(key: KeyRecord): Policy {
    if (!key.rate_limit) return this.def;
    let p = this.keyPolicies.get(key);
    if (!p) {
      p = rateLimitProblem(key.rate_limit) === null ? makePolicy('key', key.rate_limit) : this.def;
      this.keyPolicies.set(key, p);
    }
    return p;
  }

  /** Fills `c` (reused by the caller, so the hot path allocates nothing) and returns it. */
  choose(key: KeyRecord | null, clientIp: string, extraPolicy: string | null, c: Choice): Choice {
    c.test = false;
    if (key === null) {
      c.p1 = this.def;
      c.tag1 = 'a';
      c.id1 = clientIp;
    } else if (this.testEnvs.has(key.environment)) {
      c.p1 = this.sandbox;
      c.tag1 = 's';
      c.id1 = c.p1.name;
      c.test = true;
    } else {
      c.p1 = this.keyPolicy(key);
      c.tag1 = 'k';
      c.id1 = bucketOf(key);
    }
    c.p2 = null;
    if (extraPolicy !== null) {
      const q = this.policies.get(extraPolicy);
      if (q && q !== c.p1) {
        c.p2 = q;
        if (q.shared) {
          c.tag2 = 's';
          c.id2 = q.name;
        } else {
          c.tag2 = this.tags.get(q.name) as string;
          c.id2 = key ? bucketOf(key) : clientIp;
        }
      }
    }
    return c;
  }
}
