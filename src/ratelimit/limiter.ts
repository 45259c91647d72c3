import type { Config } from '../config/index.js';
import type { KeyRecord } from '../store/keys.js';
import { type Bucket, BucketSet, refill } from './buckets.js';
import { makePolicy, type Policy } from './policy.js';
import type { LimitDecision, RequestLimiter } from './types.js';

export interface QuotaWarning {
  key: KeyRecord;
  threshold: number;
  limit: number;
  used: number;
  window: string;
}

interface Quota {
  win: number;
  count: number;
  /** 0: none raised this window; 1: 80% raised; 2: 95% raised. */
  level: number;
  windowMs: number;
}

const THRESHOLDS = [0.8, 0.95];
const UNAUTH_DEFAULT = { limit: 600, burst: 600, window: 'minute' } as const;
/** Refill arithmetic is in floating point; a token short by less than this is a whole token. */
const EPS = 1e-9;
const WINDOW_NAME: Record<number, string> = { 1000: 'second', 60000: 'minute', 3600000: 'hour', 86400000: 'day' };

/**
 * Token buckets per DESIGN.md: every keyed request takes a token from its key's
 * bucket (the key's own rate_limit, else `default`; every test-class key from the
 * one shared `sandbox` bucket instead); a route or operation with its own policy
 * takes one from that policy's bucket too. All or nothing: a refused request takes
 * no token from any bucket. Unkeyed requests are limited per client address.
 */
export class RateLimiter implements RequestLimiter {
  private readonly policies = new Map<string, Policy>();
  private readonly keyPolicies = new WeakMap<KeyRecord, Policy>();
  private readonly keyBuckets: BucketSet;
  private readonly addrBuckets: BucketSet;
  private readonly refusedBuckets: BucketSet;
  private readonly unauth: Policy;
  private readonly shared = new Map<string, Bucket>();
  private readonly extra = new Map<string, BucketSet>();
  private readonly quotas = new Map<string, Quota>();
  private readonly testEnvs = new Set<string>();
  private readonly def: Policy;
  private readonly sandbox: Policy;
  private timer: NodeJS.Timeout | null = null;
  onWarning: (w: QuotaWarning) => void = () => {};

  constructor(private readonly cfg: Pick<Config, 'rate_limits' | 'environments' | 'instance' | 'ratelimit'>) {
    const n = cfg.instance.count;
    for (const [name, p] of Object.entries(cfg.rate_limits)) this.policies.set(name, makePolicy(name, p, n));
    this.def = this.policies.get('default') as Policy;
    this.sandbox = this.policies.get('sandbox') as Policy;
    this.unauth = this.policies.get('unauthenticated') ?? makePolicy('unauthenticated', UNAUTH_DEFAULT, n);
    for (const [name, e] of Object.entries(cfg.environments)) if (e.class === 'test') this.testEnvs.add(name);
    const { max_buckets, sketch_cells } = cfg.ratelimit;
    this.keyBuckets = new BucketSet(max_buckets, sketch_cells);
    this.addrBuckets = new BucketSet(max_buckets, sketch_cells);
    this.refusedBuckets = new BucketSet(max_buckets, sketch_cells);
  }

  refused(clientIp: string, now: number): LimitDecision | null {
    const b = this.refusedBuckets.get(clientIp, now, this.unauth);
    if (b.tokens >= 1 - EPS) {
      b.tokens -= 1;
      return null;
    }
    const retryAfter = Math.max(1, Math.ceil(wait(b) / 1000));
    const headers = headersFor(b, null, b);
    headers.push('retry-after', String(retryAfter));
    return { allowed: false, headers, retryAfter, policy: b.p.name };
  }

  /** Buckets held in memory, all sets together. */
  get size(): number {
    let n = this.keyBuckets.size + this.addrBuckets.size + this.refusedBuckets.size + this.shared.size;
    for (const s of this.extra.values()) n += s.size;
    return n;
  }

  policy(name: string): Policy | undefined {
    return this.policies.get(name);
  }

  private keyPolicy(key: KeyRecord): Policy {
    if (!key.rate_limit) return this.def;
    let p = this.keyPolicies.get(key);
    if (!p) {
      p = makePolicy(`key`, key.rate_limit, this.cfg.instance.count);
      this.keyPolicies.set(key, p);
    }
    return p;
  }

  private sharedBucket(p: Policy, now: number): Bucket {
    let b = this.shared.get(p.name);
    if (!b) {
      b = { tokens: p.burst, t: now, p };
      this.shared.set(p.name, b);
    } else {
      refill(b, now);
    }
    return b;
  }

  private extraBucket(p: Policy, id: string, now: number): Bucket {
    if (p.shared) return this.sharedBucket(p, now);
    let set = this.extra.get(p.name);
    if (!set) {
      set = new BucketSet(this.cfg.ratelimit.max_buckets, this.cfg.ratelimit.sketch_cells);
      this.extra.set(p.name, set);
    }
    return set.get(id, now, p);
  }

  check(key: KeyRecord | null, clientIp: string, extraPolicy: string | null, now: number): LimitDecision {
    let b1: Bucket;
    if (key === null) b1 = this.addrBuckets.get(clientIp, now, this.def);
    else if (this.testEnvs.has(key.environment)) b1 = this.sharedBucket(this.sandbox, now);
    else b1 = this.keyBuckets.get(key.id, now, this.keyPolicy(key));
    let b2: Bucket | null = null;
    if (extraPolicy !== null) {
      const p2 = this.policies.get(extraPolicy);
      if (p2 && p2 !== b1.p) b2 = this.extraBucket(p2, key ? key.id : clientIp, now);
    }
    if (b1.tokens < 1 - EPS || (b2 !== null && b2.tokens < 1 - EPS)) {
      const refusing =
        b1.tokens < 1 - EPS ? (b2 !== null && b2.tokens < 1 - EPS && wait(b2) > wait(b1) ? b2 : b1) : (b2 as Bucket);
      const retryAfter = Math.max(1, Math.ceil(wait(refusing) / 1000));
      const headers = headersFor(b1, b2, refusing);
      headers.push('retry-after', String(retryAfter));
      return { allowed: false, headers, retryAfter, policy: refusing.p.name };
    }
    b1.tokens -= 1;
    if (b2 !== null) b2.tokens -= 1;
    if (key !== null) this.countQuota(key, b1.p, now);
    const binding = b2 !== null && b2.tokens < b1.tokens ? b2 : b1;
    return { allowed: true, headers: headersFor(b1, b2, binding), retryAfter: 0, policy: null };
  }

  private countQuota(key: KeyRecord, p: Policy, now: number): void {
    const win = Math.floor(now / p.windowMs);
    let q = this.quotas.get(key.id);
    if (q === undefined || q.win !== win || q.windowMs !== p.windowMs) {
      q = { win, count: 0, level: 0, windowMs: p.windowMs };
      this.quotas.set(key.id, q);
    }
    q.count++;
    while (q.level < THRESHOLDS.length && q.count >= Math.ceil((THRESHOLDS[q.level] as number) * p.limit)) {
      const threshold = THRESHOLDS[q.level] as number;
      q.level++;
      this.onWarning({
        key,
        threshold,
        limit: p.limit,
        used: q.count,
        window: WINDOW_NAME[p.windowMs] ?? `${p.windowMs}ms`,
      });
    }
  }

  /** Drops full buckets and past quota windows; runs in the background. */
  sweep(now: number): void {
    this.keyBuckets.sweep(now);
    this.addrBuckets.sweep(now);
    this.refusedBuckets.sweep(now);
    for (const s of this.extra.values()) s.sweep(now);
    for (const [id, q] of this.quotas) if (q.win !== Math.floor(now / q.windowMs)) this.quotas.delete(id);
  }

  start(now: () => number, everyMs = 10_000): void {
    this.timer = setInterval(() => this.sweep(now()), everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

/** Milliseconds until the bucket holds one whole token. */
const wait = (b: Bucket): number => (b.tokens >= 1 - EPS ? 0 : (1 - b.tokens) / b.p.rate);

/**
 * x-ratelimit-* describe the binding bucket (the refusing one, or the one with
 * fewer tokens left); RateLimit-Policy and RateLimit (IETF draft
 * draft-ietf-httpapi-ratelimit-headers) list every bucket the request drew from.
 */
function headersFor(b1: Bucket, b2: Bucket | null, binding: Bucket): string[] {
  const reset = (b: Bucket) => Math.max(0, Math.ceil((b.p.burst - b.tokens) / b.p.rate / 1000 - EPS));
  const remaining = (b: Bucket) => (b.tokens < 0 ? 0 : Math.floor(b.tokens + EPS));
  const item = (b: Bucket) => `"${b.p.name}";r=${remaining(b)};t=${reset(b)}`;
  return [
    'x-ratelimit-limit',
    String(binding.p.limit),
    'x-ratelimit-remaining',
    String(remaining(binding)),
    'x-ratelimit-reset',
    String(reset(binding)),
    'ratelimit-policy',
    b2 === null ? b1.p.header : `${b1.p.header}, ${b2.p.header}`,
    'ratelimit',
    b2 === null ? item(b1) : `${item(b1)}, ${item(b2)}`,
  ];
}
