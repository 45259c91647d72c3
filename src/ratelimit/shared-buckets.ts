/**
 * Token buckets in shared memory (`SharedArrayBuffer`), exact across threads: every
 * edge thread maps the same table, and a decision holds the locks of the buckets it
 * draws from, so N threads admit exactly what one would.
 *
 * The table is `slots` cache-line-sized slots (64 bytes: two threads working on
 * neighbouring buckets never share a line). A bucket is found by a keyed 64-bit hash
 * of its name (bucket-hash.ts; the key, a random seed, lives in the table's header so
 * every thread agrees) within a window of `WINDOW` slots from its home; a bucket that
 * has refilled to capacity is the same as no bucket, so its slot is taken over by the
 * next new bucket. When a whole window is draining, the bucket that would be full
 * soonest is folded into a sketch (per cell of the hash's second word, the latest instant an evicted
 * bucket would be full again) and a new bucket starts from that: eviction and hash
 * collisions can only make a limit stricter, never looser.
 *
 * A decision does bounded work whatever the names: `acquire` probes the window at
 * most twice (once without the claim lock, once under it) and returns the slot
 * locked; under the claim lock no slot changes hands, so nothing is retried. The
 * second bucket of a decision never evicts the first.
 *
 * Locks know their owner (slot-lock.ts) and are never broken by time: the thread that
 * made the table releases a dead thread's locks (`releaseThread`), and its own sweep and
 * snapshot never wait long on a slot (a slot held that long is skipped, or read as is).
 *
 * After the sketch, a bit per slot says which slots hold a bucket: set when a bucket
 * is put in a slot, cleared when the sweep empties it, both under the claim lock
 * (never by a decision that finds its bucket in place). The sweep and the snapshot go
 * through the set bits, not through every slot: a table of 200,000 slots holding a few
 * buckets costs them a few microseconds, not milliseconds.
 */
import { randomFillSync } from 'node:crypto';
import { bucketHash, hashOut } from './bucket-hash.js';
import { lock, releaseOwner, tryLock, unlock } from './slot-lock.js';

/** Int32 cells of a slot: lock, hash (two words; 0,0 is empty), quota level, quota count. */
const LOCK = 0;
const H1 = 1;
const H2 = 2;
const Q_LEVEL = 3;
const Q_COUNT = 4;
/** Float64 cells of a slot (after the Int32 ones): tokens, when last refilled, its policy, quota window. */
const TOKENS = 3;
const T = 4;
const BURST = 5;
const RATE = 6;
const Q_WIN = 7;
const SLOT_I32 = 16;
const SLOT_F64 = 8;
/** Waits of a millisecond the sweep and the snapshot give a held slot before they pass it by. */
const PASS_WAITS = 20;
/** Slots searched from a bucket's home. */
export const WINDOW = 16;
/**
 * The header: the claim lock (Int32 0), the hash seed (Int32 1 and 2), the count of
 * buckets ever put in a slot (Int32 3), padding up to one slot.
 */
const HEADER = 1;
const SEED0 = 1;
const SEED1 = 2;
const CLAIMS = 3;

export interface SharedBucketsLayout {
  buffer: SharedArrayBuffer;
  slots: number;
  sketchCells: number;
}

/** A bucket to find: its name (kind and id) and its policy. Reused by callers: the hot path allocates none. */
export interface BucketRef {
  tag: string;
  id: string;
  burst: number;
  rate: number;
}

/** Work done by this thread, for tests: slots probed (a decision probes at most 4 windows), buckets evicted. */
export const tableStats = { probes: 0, evictions: 0 };

/**
 * Allocates the shared table (zeroed: every slot empty; pages the OS never touches
 * cost no memory) with a random hash seed, or `seed` (tests; a restored table).
 */
export function allocateBuckets(
  slots: number,
  sketchCells: number,
  seed?: readonly [number, number],
): SharedBucketsLayout {
  const bytes = (HEADER + slots) * SLOT_I32 * 4 + sketchCells * 8 + usedWords(slots) * 4;
  const buffer = new SharedArrayBuffer(bytes);
  const head = new Int32Array(buffer, 0, SLOT_I32);
  if (seed) {
    head[SEED0] = seed[0] | 0;
    head[SEED1] = seed[1] | 0;
  } else randomFillSync(head.subarray(SEED0, SEED1 + 1));
  return { buffer, slots, sketchCells };
}

/**
 * Buckets ever put in a slot (wrapping): unchanged since a look that found the table
 * empty, it is empty still, and its sweep and its saving have nothing to do.
 */
export function claimsOf(layout: SharedBucketsLayout): number {
  return Atomics.load(new Int32Array(layout.buffer, 0, SLOT_I32), CLAIMS);
}

/** Int32 words of the bitmap of slots in use. */
const usedWords = (slots: number): number => Math.ceil(slots / 32);

/** The hash seed of a table. */
export function seedOf(layout: SharedBucketsLayout): [number, number] {
  const head = new Int32Array(layout.buffer, 0, SLOT_I32);
  return [head[SEED0] as number, head[SEED1] as number];
}

export class SharedBuckets {
  private readonly i32: Int32Array;
  readonly f64: Float64Array;
  readonly sketch: Float64Array;
  /** A bit per slot, set while it may hold a bucket (every slot holding one has its bit set). */
  private readonly used: Int32Array;
  readonly slots: number;
  private readonly k0: number;
  private readonly k1: number;
  /** The slots of the last `acquirePair`. */
  s1 = 0;
  s2 = 0;
  /** The last name hashed and its hash (`ha`, `hb`): one client's requests often come in a row. */
  private lastTag = '';
  private lastId = '';
  private ha = 0;
  private hb = 0;

  constructor(layout: SharedBucketsLayout) {
    this.slots = layout.slots;
    const tableBytes = (HEADER + layout.slots) * SLOT_I32 * 4;
    this.i32 = new Int32Array(layout.buffer, 0, tableBytes / 4);
    this.f64 = new Float64Array(layout.buffer, 0, tableBytes / 8);
    this.sketch = new Float64Array(layout.buffer, tableBytes, layout.sketchCells);
    this.used = new Int32Array(layout.buffer, tableBytes + layout.sketchCells * 8, usedWords(layout.slots));
    this.k0 = this.i32[SEED0] as number;
    this.k1 = this.i32[SEED1] as number;
  }

  /** Int32 index of slot `s`'s first cell. */
  private base(s: number): number {
    return (s + HEADER) * SLOT_I32;
  }

  /** Float64 index of cell `c` of slot `s`. */
  f(s: number, c: number): number {
    return (s + HEADER) * SLOT_F64 + c;
  }

  /** Hashes `tag`+`id` into `ha`, `hb` (or finds it was the last name hashed). */
  private hash(tag: string, id: string): void {
    if (id === this.lastId && tag === this.lastTag && this.hb !== 0) return;
    bucketHash(this.k0, this.k1, tag, id);
    this.ha = hashOut.h1;
    this.hb = hashOut.h2;
    this.lastTag = tag;
    this.lastId = id;
  }

  /** The slot in the window from `home` whose bucket hashes to `a`,`b`, or -1 (`WINDOW` probes). */
  private scan(a: number, b: number, home: number): number {
    const i = this.i32;
    tableStats.probes += WINDOW;
    for (let k = 0; k < WINDOW; k++) {
      let s = home + k;
      if (s >= this.slots) s -= this.slots;
      const x = this.base(s);
      if (Atomics.load(i, x + H1) === a && Atomics.load(i, x + H2) === b) return s;
    }
    return -1;
  }

  /**
   * The slot of bucket `r`, locked and holding it (found, else claimed: from the
   * sketch if it was evicted). At most two probes of the window, no retry.
   */
  acquire(r: BucketRef, now: number): number {
    this.hash(r.tag, r.id);
    const a = this.ha;
    const b = this.hb;
    const home = (a >>> 0) % this.slots;
    const s = this.scan(a, b, home);
    if (s >= 0) {
      this.lock(s);
      if (this.holds(s, a, b)) return s;
      this.unlock(s);
    }
    lock(this.i32, 0);
    try {
      const c = this.findOrClaim(a, b, home, r, now, -1);
      // Under the claim lock no slot changes hands: once locked, `c` is still this bucket's.
      this.lock(c);
      return c;
    } finally {
      unlock(this.i32, 0);
    }
  }

  /**
   * The slots of two buckets (`s1`, `s2`), both locked (in slot order: threads never
   * wait on each other) and holding them; the second's claim never evicts the first.
   */
  acquirePair(r1: BucketRef, r2: BucketRef, now: number): void {
    this.hash(r1.tag, r1.id);
    const a1 = this.ha;
    const b1 = this.hb;
    this.hash(r2.tag, r2.id);
    const a2 = this.ha;
    const b2 = this.hb;
    const home1 = (a1 >>> 0) % this.slots;
    const home2 = (a2 >>> 0) % this.slots;
    let s1 = this.scan(a1, b1, home1);
    let s2 = s1 < 0 ? -1 : this.scan(a2, b2, home2);
    if (s2 >= 0) {
      this.lock2(s1, s2);
      if (this.holds(s1, a1, b1) && this.holds(s2, a2, b2)) {
        this.s1 = s1;
        this.s2 = s2;
        return;
      }
      this.unlock2(s1, s2);
    }
    lock(this.i32, 0);
    try {
      s1 = this.findOrClaim(a1, b1, home1, r1, now, -1);
      s2 = this.findOrClaim(a2, b2, home2, r2, now, s1);
      this.lock2(s1, s2);
      this.s1 = s1;
      this.s2 = s2;
    } finally {
      unlock(this.i32, 0);
    }
  }

  private lock2(s1: number, s2: number): void {
    if (s1 === s2) {
      this.lock(s1);
    } else {
      const lo = Math.min(s1, s2);
      this.lock(lo);
      try {
        this.lock(Math.max(s1, s2));
      } catch (e) {
        // The main thread gave up on the second (slot-lock.ts: LockStalled): hold neither.
        this.unlock(lo);
        throw e;
      }
    }
  }

  unlock2(s1: number, s2: number): void {
    this.unlock(s1);
    if (s2 !== s1) this.unlock(s2);
  }

  holds(s: number, a: number, b: number): boolean {
    const x = this.base(s);
    return Atomics.load(this.i32, x + H1) === a && Atomics.load(this.i32, x + H2) === b;
  }

  /**
   * Under the claim lock: the slot of bucket `a`,`b` in its window, else a slot taken
   * over for it (never `keep`): an empty one, else the bucket full soonest, its debt
   * folded into the sketch. Deterministic, one probe of the window, never waits but
   * on the victim's lock.
   */
  private findOrClaim(a: number, b: number, home: number, r: BucketRef, now: number, keep: number): number {
    const i = this.i32;
    const f = this.f64;
    let victim = -1;
    let soonest = Number.POSITIVE_INFINITY;
    tableStats.probes += WINDOW;
    for (let k = 0; k < WINDOW; k++) {
      let s = home + k;
      if (s >= this.slots) s -= this.slots;
      const x = this.base(s);
      const h1 = Atomics.load(i, x + H1);
      const h2 = Atomics.load(i, x + H2);
      if (h1 === a && h2 === b) return s;
      if (s === keep || soonest === Number.NEGATIVE_INFINITY) continue;
      // An empty slot, or one whose numbers are not a bucket's (NaN), is free.
      const fullAt = h2 === 0 ? Number.NEGATIVE_INFINITY : this.fullAt(s);
      if (victim < 0 || !(fullAt >= soonest)) {
        soonest = Number.isNaN(fullAt) ? Number.NEGATIVE_INFINITY : fullAt;
        victim = s;
      }
    }
    const s = victim;
    const x = this.base(s);
    this.lock(s);
    try {
      // Read again under the slot's lock: a thread may have drawn from this bucket since
      // the scan, and its debt, not the scan's, is what the sketch must keep. The debt is
      // when its tokens are full again, not when its quota window ends: the window only
      // counts uses for quota warnings, and folding it in would have the key come back
      // owing the rest of its window (a day's quota: its whole burst).
      if (Atomics.load(i, x + H2) !== 0 && this.fullAt(s) > now) {
        const refilledAt = this.refilledAt(s);
        if (refilledAt > now) this.foldIntoSketch(Atomics.load(i, x + H2), refilledAt);
        tableStats.evictions++;
      }
      const owed = this.sketch[this.cell(b)] as number;
      // Marked in use before it holds the bucket: a reader of the bits never misses it.
      this.markUsed(s);
      Atomics.store(i, x + H1, a);
      Atomics.store(i, x + H2, b);
      Atomics.add(i, CLAIMS, 1);
      i[x + Q_LEVEL] = 0;
      i[x + Q_COUNT] = 0;
      f[this.f(s, TOKENS)] = owed > now ? Math.max(0, r.burst - (owed - now) * r.rate) : r.burst;
      f[this.f(s, T)] = now;
      f[this.f(s, BURST)] = r.burst;
      f[this.f(s, RATE)] = r.rate;
      f[this.f(s, Q_WIN)] = -1;
    } finally {
      this.unlock(s);
    }
    return s;
  }

  /**
   * A bucket's sketch cell, from its hash's second word (the first places it in the table:
   * buckets sharing a window share no cell for it); that word's low bit is always 1.
   */
  private cell(h2: number): number {
    return (h2 >>> 1) % this.sketch.length;
  }

  private foldIntoSketch(h2: number, fullAt: number): void {
    const c = this.cell(h2);
    if (fullAt > (this.sketch[c] as number)) this.sketch[c] = fullAt;
  }

  /** When slot `s`'s bucket is full again (and its quota window over): until then it is not free. */
  fullAt(s: number): number {
    return Math.max(this.refilledAt(s), this.f64[this.f(s, Q_WIN)] as number);
  }

  /** When slot `s`'s bucket holds its burst again: its debt, what an eviction folds into the sketch. */
  private refilledAt(s: number): number {
    const f = this.f64;
    const rate = f[this.f(s, RATE)] as number;
    return (f[this.f(s, T)] as number) + ((f[this.f(s, BURST)] as number) - (f[this.f(s, TOKENS)] as number)) / rate;
  }

  lock(s: number): void {
    lock(this.i32, this.base(s) + LOCK);
  }

  unlock(s: number): void {
    unlock(this.i32, this.base(s) + LOCK);
  }

  /**
   * Refills slot `s` (locked) to `now` under a policy of `burst` and `rate` (a changed
   * policy keeps the debt, under the new capacity), and returns its tokens.
   */
  refill(s: number, now: number, burst: number, rate: number): number {
    const f = this.f64;
    const ti = this.f(s, TOKENS);
    let tokens = f[ti] as number;
    if (f[this.f(s, BURST)] !== burst || f[this.f(s, RATE)] !== rate) {
      if (tokens > burst) tokens = burst;
      f[this.f(s, BURST)] = burst;
      f[this.f(s, RATE)] = rate;
    }
    const tt = this.f(s, T);
    const t = f[tt] as number;
    if (now > t) {
      tokens += (now - t) * rate;
      if (tokens > burst) tokens = burst;
      f[tt] = now;
    }
    f[ti] = tokens;
    return tokens;
  }

  setTokens(s: number, tokens: number): void {
    this.f64[this.f(s, TOKENS)] = tokens;
  }

  /**
   * Counts one use against the quota window that `now` falls in (slot `s` locked);
   * returns the count, and the level already raised before this use.
   */
  countQuota(s: number, now: number, windowMs: number): { count: number; level: number } {
    const x = this.base(s);
    const wi = this.f(s, Q_WIN);
    const start = now - (now % windowMs);
    if (this.f64[wi] !== start + windowMs) {
      this.f64[wi] = start + windowMs;
      this.i32[x + Q_COUNT] = 0;
      this.i32[x + Q_LEVEL] = 0;
    }
    const count = (this.i32[x + Q_COUNT] as number) + 1;
    this.i32[x + Q_COUNT] = count;
    return { count, level: this.i32[x + Q_LEVEL] as number };
  }

  setQuotaLevel(s: number, level: number): void {
    this.i32[this.base(s) + Q_LEVEL] = level;
  }

  /** Buckets held: slots in use whose bucket is not yet full again. */
  size(now: number): number {
    let n = 0;
    for (let s = this.nextUsed(0); s >= 0; s = this.nextUsed(s + 1))
      if (this.i32[this.base(s) + H2] !== 0 && this.fullAt(s) > now) n++;
    return n;
  }

  /** Marks slot `s` in use (under the claim lock). */
  private markUsed(s: number): void {
    Atomics.or(this.used, s >>> 5, 1 << (s & 31));
  }

  /** Marks slot `s` empty (under the claim lock, once it holds no bucket). */
  private clearUsed(s: number): void {
    Atomics.and(this.used, s >>> 5, ~(1 << (s & 31)));
  }

  /**
   * The first slot from `s` on that is marked in use (it may hold a bucket; every slot
   * holding one is marked), or -1: a word of the bitmap read for 32 slots.
   */
  nextUsed(s: number): number {
    const u = this.used;
    let w = s >>> 5;
    if (s >= this.slots) return -1;
    let bits = Atomics.load(u, w) & (-1 << (s & 31));
    for (;;) {
      if (bits !== 0) {
        const found = (w << 5) + 31 - Math.clz32(bits & -bits);
        return found < this.slots ? found : -1;
      }
      if (++w >= u.length) return -1;
      bits = Atomics.load(u, w);
    }
  }

  /** The claim count when this table's sweep last left it empty (-1: it did not). */
  private emptyAt = -1;

  /**
   * Empties every slot whose bucket is full by `now` (the same as no bucket): it goes
   * through the slots marked in use only. A table no bucket has entered since a sweep
   * left it empty is not looked at again (idle).
   */
  sweep(now: number): number {
    const claims = Atomics.load(this.i32, CLAIMS);
    if (claims === this.emptyAt) return 0;
    let removed = 0;
    let left = 0;
    for (let s = this.nextUsed(0); s >= 0; s = this.nextUsed(s + 1)) {
      const x = this.base(s);
      if (Atomics.load(this.i32, x + H2) === 0) continue;
      if (this.fullAt(s) > now) {
        left++;
        continue;
      }
      if (!tryLock(this.i32, 0, PASS_WAITS)) {
        left++;
        continue;
      }
      if (!tryLock(this.i32, x + LOCK, PASS_WAITS)) {
        unlock(this.i32, 0);
        left++;
        continue;
      }
      if (this.i32[x + H2] !== 0 && this.fullAt(s) <= now) {
        Atomics.store(this.i32, x + H1, 0);
        Atomics.store(this.i32, x + H2, 0);
        this.clearUsed(s);
        removed++;
      } else left++;
      unlock(this.i32, x + LOCK);
      unlock(this.i32, 0);
    }
    this.emptyAt = left === 0 ? claims : -1;
    return removed;
  }

  /**
   * Slot `s`'s bucket, read under its lock, for a snapshot (hash, quota level and count;
   * tokens, when, burst, rate, quota window): false if the slot is empty or the bucket
   * is full again by `now` (the same as no bucket).
   */
  read(s: number, now: number, i32Out: Int32Array, f64Out: Float64Array): boolean {
    const x = this.base(s);
    if (Atomics.load(this.i32, x + H2) === 0) return false;
    // A slot held past PASS_WAITS (a stalled or dead holder) is read as is: at most one decision old.
    const locked = tryLock(this.i32, x + LOCK, PASS_WAITS);
    const held = this.i32[x + H2] !== 0 && this.fullAt(s) > now;
    if (held) {
      for (let c = 0; c < 4; c++) i32Out[c] = this.i32[x + H1 + c] as number;
      for (let c = 0; c < 5; c++) f64Out[c] = this.f64[this.f(s, TOKENS + c)] as number;
    }
    if (locked) this.unlock(s);
    return held;
  }

  /**
   * Releases every lock `owner` (a thread's slot-lock OWNER) holds: called by the thread
   * that made the table once that thread has exited, never while it runs. Returns how many.
   */
  releaseThread(owner: number): number {
    let n = releaseOwner(this.i32, 0, owner) ? 1 : 0;
    for (let s = 0; s < this.slots; s++) if (releaseOwner(this.i32, this.base(s) + LOCK, owner)) n++;
    return n;
  }

  /**
   * Puts a snapshotted bucket back (at start, before any decision): in its window if
   * a slot is free, else into the sketch, so a restore can only make limits stricter.
   */
  restore(i32In: Int32Array, f64In: Float64Array): void {
    const a = i32In[0] as number;
    const b = (i32In[1] as number) | 1;
    const home = (a >>> 0) % this.slots;
    for (let k = 0; k < WINDOW; k++) {
      let s = home + k;
      if (s >= this.slots) s -= this.slots;
      const x = this.base(s);
      if (this.i32[x + H2] !== 0) continue;
      this.markUsed(s);
      this.i32[x + H1] = a;
      this.i32[x + H2] = b;
      Atomics.add(this.i32, CLAIMS, 1);
      this.i32[x + Q_LEVEL] = i32In[2] as number;
      this.i32[x + Q_COUNT] = i32In[3] as number;
      for (let c = 0; c < 5; c++) this.f64[this.f(s, TOKENS + c)] = f64In[c] as number;
      return;
    }
    const full = (f64In[1] as number) + ((f64In[2] as number) - (f64In[0] as number)) / (f64In[3] as number);
    if (!Number.isNaN(full)) this.foldIntoSketch(b, full);
    Atomics.add(this.i32, CLAIMS, 1);
  }
}
