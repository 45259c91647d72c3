import { bucketOf, type KeyRecord } from '../auth/key.js';
import type { Config } from '../config/index.js';
import { type Choice, emptyChoice, type Policy, PolicySet } from './policy.js';
import { allocateBuckets, type BucketRef, SharedBuckets, type SharedBucketsLayout } from './shared-buckets.js';
import type { LimitDecision, RequestLimiter } from './types.js';

export interface QuotaWarning {
  key: KeyRecord;
  threshold: number;
  limit: number;
  used: number;
  window: string;
  /** When the quota window the warning is of began (ms): the warning's identity, with the bucket and threshold. */
  windowStart: number;
}

/** The data of the consumer.quota.warning event a warning raises. */
export const quotaWarningData = (w: QuotaWarning): Record<string, unknown> => ({
  key_id: w.key.id,
  consumer: w.key.consumer,
  threshold: w.threshold,
  limit: w.limit,
  used: w.used,
  window: w.window,
});

export const THRESHOLDS = [0.8, 0.95];
/** Refill arithmetic is in floating point; a token short by less than this is a whole token. */
export const EPS = 1e-9;
export const WINDOW_NAME: Record<number, string> = {
  1000: 'second',
  60000: 'minute',
  3600000: 'hour',
  86400000: 'day',
};

/**
 * Token buckets per DESIGN.md: every keyed request takes a token from its key's
 * bucket (the key's own rate_limit, else `default`; every test-class key from the
 * one shared `sandbox` bucket instead); a route or operation with its own policy
 * takes one from that policy's bucket too. All or nothing: a refused request takes
 * no token from any bucket. Unkeyed requests are limited per client address.
 *
 * The buckets live in shared memory (shared-buckets.ts), so every edge thread
 * given the same `layout` decides against the same buckets, exactly.
 */
export class RateLimiter implements RequestLimiter {
  private readonly set: PolicySet;
  private readonly c: Choice;
  private readonly table: SharedBuckets;
  /** The buckets of the decision being made (reused: the hot path allocates none). */
  private readonly r1: BucketRef = { tag: '', id: '', burst: 0, rate: 0, windowMs: 0 };
  private readonly r2: BucketRef = { tag: '', id: '', burst: 0, rate: 0, windowMs: 0 };
  /** The shared table, for other threads' limiters. */
  readonly layout: SharedBucketsLayout;
  private timer: NodeJS.Timeout | null = null;
  private now: () => number = Date.now;
  /** The quota count of the last use counted. */
  private used = 0;
  private readonly onWarning: (w: QuotaWarning) => void;

  /** `onWarning` hears each quota threshold crossed (consumer.quota.warning). */
  constructor(
    cfg: Pick<Config, 'rate_limits' | 'environments' | 'ratelimit'>,
    layout?: SharedBucketsLayout,
    onWarning: (w: QuotaWarning) => void = () => {},
  ) {
    this.onWarning = onWarning;
    this.set = new PolicySet(cfg);
    this.c = emptyChoice(this.set.def);
    this.layout = layout ?? allocateBuckets(cfg.ratelimit.max_buckets, cfg.ratelimit.sketch_cells);
    this.table = new SharedBuckets(this.layout);
  }

  refused(clientIp: string, now: number): LimitDecision {
    const t = this.table;
    const p = this.set.unauth;
    const s = this.locked('r', clientIp, p, now, false);
    const tokens = t.refill(s, now, p.burst, p.rate);
    if (tokens >= 1 - EPS) {
      t.setTokens(s, tokens - 1);
      t.unlock(s);
      return { allowed: true, headers: headersFor(p, tokens - 1, null, 0, false), retryAfter: 0, policy: null };
    }
    t.unlock(s);
    const retryAfter = Math.max(1, Math.ceil(wait(p, tokens) / 1000));
    const headers = headersFor(p, tokens, null, 0, false);
    headers.push('retry-after', String(retryAfter));
    return { allowed: false, headers, retryAfter, policy: p.name };
  }

  /**
   * The slot of one bucket, locked, and still its own (bounded work: see SharedBuckets.acquire);
   * `quota`: its quota window is counted (a key's), so a claim starts from the quota sketch.
   */
  private locked(tag: string, id: string, p: Policy, now: number, quota: boolean): number {
    const r = this.r1;
    r.tag = tag;
    r.id = id;
    r.burst = p.burst;
    r.rate = p.rate;
    r.windowMs = quota ? p.windowMs : 0;
    return this.table.acquire(r, now);
  }

  /** Buckets held in shared memory, all kinds together. */
  get size(): number {
    return this.table.size(this.now());
  }

  policy(name: string): Policy | undefined {
    return this.set.get(name);
  }

  check(key: KeyRecord | null, clientIp: string, extraPolicy: string | null, now: number): LimitDecision {
    const { p1, tag1, id1, test, p2, tag2, id2 } = this.set.choose(key, clientIp, extraPolicy, this.c);
    const t = this.table;
    // A key's own bucket counts its quota window (a test key's shared sandbox bucket does not).
    const counted = key !== null && !test;
    if (p2 === null) {
      const s1 = this.locked(tag1, id1, p1, now, counted);
      const tok = t.refill(s1, now, p1.burst, p1.rate);
      if (tok < 1 - EPS) {
        t.unlock(s1);
        return refusal(p1, tok, null, 0, false);
      }
      t.setTokens(s1, tok - 1);
      const raised = counted ? this.countQuota(s1, p1, now) : 0;
      t.unlock(s1);
      if (key !== null) this.quota(key, p1, now, test ? -1 : s1, raised);
      return { allowed: true, headers: headersFor(p1, tok - 1, null, 0, false), retryAfter: 0, policy: null };
    }
    // Two buckets: both locked (in slot order, so two threads never wait on each other), all or nothing.
    const r1 = this.r1;
    r1.tag = tag1;
    r1.id = id1;
    r1.burst = p1.burst;
    r1.rate = p1.rate;
    r1.windowMs = counted ? p1.windowMs : 0;
    const r2 = this.r2;
    r2.tag = tag2;
    r2.id = id2;
    r2.burst = p2.burst;
    r2.rate = p2.rate;
    t.acquirePair(r1, r2, now);
    const s1 = t.s1;
    const s2 = t.s2;
    const tok1 = t.refill(s1, now, p1.burst, p1.rate);
    const tok2 = s1 === s2 ? tok1 - 1 : t.refill(s2, now, p2.burst, p2.rate);
    if (tok1 < 1 - EPS || tok2 < 1 - EPS) {
      this.unlock2(s1, s2);
      const second = tok1 >= 1 - EPS || (tok2 < 1 - EPS && wait(p2, tok2) > wait(p1, tok1));
      return refusal(p1, tok1, p2, tok2, second);
    }
    t.setTokens(s1, tok1 - 1);
    if (s1 !== s2) t.setTokens(s2, tok2 - 1);
    const raised = counted ? this.countQuota(s1, p1, now) : 0;
    this.unlock2(s1, s2);
    if (key !== null) this.quota(key, p1, now, test ? -1 : s1, raised);
    const second = tok2 - 1 < tok1 - 1;
    return { allowed: true, headers: headersFor(p1, tok1 - 1, p2, tok2 - 1, second), retryAfter: 0, policy: null };
  }

  private unlock2(s1: number, s2: number): void {
    this.table.unlock2(s1, s2);
  }

  /**
   * Counts a use against its key's quota window in slot `s` (locked): the thresholds
   * it crossed, as a bit set (raised once the locks are let go).
   */
  private countQuota(s: number, p: Policy, now: number): number {
    const count = this.table.countQuota(s, now, p.windowMs);
    let level = this.table.countedLevel;
    let raised = 0;
    while (level < THRESHOLDS.length && count >= Math.ceil((THRESHOLDS[level] as number) * p.limit)) {
      raised |= 1 << level;
      level++;
    }
    if (raised !== 0) this.table.setQuotaLevel(s, level);
    this.used = count;
    return raised;
  }

  /**
   * Raises the quota warnings a use crossed. A key's quota is counted in its bucket's slot,
   * so a rotated key counts with the key it replaced (bucketOf); a test key's has a slot of
   * its own (its bucket is the shared sandbox one), named the same way.
   */
  private quota(key: KeyRecord, p: Policy, now: number, s: number, raised: number): void {
    if (s < 0) {
      const qs = this.locked('q', bucketOf(key), p, now, true);
      raised = this.countQuota(qs, p, now);
      this.table.unlock(qs);
    }
    if (raised === 0) return;
    for (let level = 0; level < THRESHOLDS.length; level++) {
      if ((raised & (1 << level)) === 0) continue;
      const threshold = THRESHOLDS[level] as number;
      this.onWarning({
        key,
        threshold,
        limit: p.limit,
        used: this.used,
        window: WINDOW_NAME[p.windowMs] ?? `${p.windowMs}ms`,
        windowStart: now - (now % p.windowMs),
      });
    }
  }

  /** Empties the slots of buckets that are full again; runs in the background. */
  sweep(now: number): void {
    this.table.sweep(now);
  }

  start(now: () => number, everyMs = 10_000): void {
    this.now = now;
    this.timer = setInterval(() => this.sweep(now()), everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

export function refusal(p1: Policy, tok1: number, p2: Policy | null, tok2: number, second: boolean): LimitDecision {
  const retryAfter = Math.max(1, Math.ceil((second ? wait(p2 as Policy, tok2) : wait(p1, tok1)) / 1000));
  const headers = headersFor(p1, tok1, p2, tok2, second);
  headers.push('retry-after', String(retryAfter));
  return { allowed: false, headers, retryAfter, policy: second ? (p2 as Policy).name : p1.name };
}

/** Milliseconds until a bucket under `p` holding `tokens` holds one whole token. */
const wait = (p: Policy, tokens: number): number => (tokens >= 1 - EPS ? 0 : (1 - tokens) / p.rate);

/**
 * x-ratelimit-* describe the binding bucket (the refusing one, or the one with
 * fewer tokens left: the second when `second`); RateLimit-Policy and RateLimit (IETF
 * draft draft-ietf-httpapi-ratelimit-headers) list every bucket the request drew from.
 */
export function headersFor(p1: Policy, tok1: number, p2: Policy | null, tok2: number, second: boolean): string[] {
  const reset = (p: Policy, tokens: number) => Math.max(0, Math.ceil((p.burst - tokens) / p.rate / 1000 - EPS));
  const remaining = (tokens: number) => (tokens < 0 ? 0 : Math.floor(tokens + EPS));
  const item = (p: Policy, tokens: number) => `"${p.name}";r=${remaining(tokens)};t=${reset(p, tokens)}`;
  const bp = second ? (p2 as Policy) : p1;
  const bt = second ? tok2 : tok1;
  return [
    'x-ratelimit-limit',
    String(bp.limit),
    'x-ratelimit-remaining',
    String(remaining(bt)),
    'x-ratelimit-reset',
    String(reset(bp, bt)),
    'ratelimit-policy',
    p2 === null ? p1.header : `${p1.header}, ${p2.header}`,
    'ratelimit',
    p2 === null ? item(p1, tok1) : `${item(p1, tok1)}, ${item(p2, tok2)}`,
  ];
}
