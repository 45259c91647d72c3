import type { Policy } from './policy.js';

/** Tokens held at time `t` under policy `p`; refilled lazily when next looked at. */
export interface Bucket {
  tokens: number;
  t: number;
  p: Policy;
}

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

const fnv1a = (s: string): number => {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
};

/**
 * A set of buckets (each under its own policy), bounded in memory. A bucket that has refilled to
 * capacity is the same as no bucket, so sweeping removes it without loosening
 * anything. Past `maxBuckets`, the oldest buckets are evicted into a fixed-size
 * sketch that keeps, per hash cell, the latest instant any evicted bucket would
 * be full again; a new bucket starts from that, so an eviction (and a hash
 * collision) can only make a limit stricter, never looser.
 */
export class BucketSet {
  private readonly map = new Map<string, Bucket>();
  private readonly sketch: Float64Array;

  constructor(
    private readonly maxBuckets: number,
    sketchCells: number,
  ) {
    this.sketch = new Float64Array(sketchCells);
  }

  get size(): number {
    return this.map.size;
  }

  /** The bucket for `id` under policy `p`, refilled to `now` (created full, or from the sketch). */
  get(id: string, now: number, p: Policy): Bucket {
    let b = this.map.get(id);
    if (b === undefined) {
      if (this.map.size >= this.maxBuckets) this.evict(now);
      const fullAt = this.sketch[fnv1a(id) % this.sketch.length] as number;
      const tokens = fullAt > now ? Math.max(0, p.burst - (fullAt - now) * p.rate) : p.burst;
      b = { tokens, t: now, p };
      this.map.set(id, b);
      return b;
    }
    if (b.p !== p) {
      // The key's policy changed: keep the debt, under the new capacity.
      b.tokens = Math.min(b.tokens, p.burst);
      b.p = p;
    }
    refill(b, now);
    return b;
  }

  /** Removes every bucket that is full by now. */
  sweep(now: number): number {
    let removed = 0;
    for (const [id, b] of this.map) {
      if (b.tokens + (now - b.t) * b.p.rate >= b.p.burst) {
        this.map.delete(id);
        removed++;
      }
    }
    return removed;
  }

  private evict(now: number): void {
    if (this.sweep(now) > 0 && this.map.size < this.maxBuckets) return;
    // Still full of draining buckets: fold the oldest tenth into the sketch.
    let n = Math.max(1, Math.floor(this.maxBuckets / 10));
    for (const [id, b] of this.map) {
      if (n-- <= 0) break;
      const fullAt = b.t + (b.p.burst - b.tokens) / b.p.rate;
      const cell = fnv1a(id) % this.sketch.length;
      if (fullAt > (this.sketch[cell] as number)) this.sketch[cell] = fullAt;
      this.map.delete(id);
    }
  }
}
