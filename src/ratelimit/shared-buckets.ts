/**
 * Token buckets in shared memory (`SharedArrayBuffer`), exact across threads: every
 * edge thread maps the same table, and a decision holds the locks of the buckets it
 * draws from, so N threads admit exactly what one would.
 *
 * The table is `slots` cache-line-sized slots (64 bytes: two threads working on
 * neighbouring buckets never share a line). A bucket is found by a 64-bit hash of
 * its name within a window of `WINDOW` slots from its home; a bucket that has
 * refilled to capacity is the same as no bucket, so its slot is taken over by the
 * next new bucket. When a whole window is draining, the bucket that would be full
 * soonest is folded into a sketch (per hash cell, the latest instant an evicted
 * bucket would be full again) and a new bucket starts from that: eviction and hash
 * collisions can only make a limit stricter, never looser.
 */

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
/** Slots searched from a bucket's home. */
const WINDOW = 16;
/** The header: the claim lock (Int32 0) and padding up to one slot. */
const HEADER = 1;

export interface SharedBucketsLayout {
  buffer: SharedArrayBuffer;
  slots: number;
  sketchCells: number;
}

/** Allocates the shared table (zeroed: every slot empty). Pages the OS never touches cost no memory. */
export function allocateBuckets(slots: number, sketchCells: number): SharedBucketsLayout {
  const bytes = (HEADER + slots) * SLOT_I32 * 4 + sketchCells * 8;
  return { buffer: new SharedArrayBuffer(bytes), slots, sketchCells };
}

/** Two independent 32-bit hashes of `tag` followed by `id` (FNV-1a and a multiply-rotate), the second never 0. */
let h1Out = 0;
let h2Out = 0;
function hashOf(tag: string, id: string): void {
  h1Out = 0x811c9dc5;
  h2Out = 0x9747b28c;
  mix(tag);
  mix(id);
  h2Out ^= h2Out >>> 15;
  h1Out |= 0;
  h2Out |= 1;
}

function mix(s: string): void {
  let a = h1Out;
  let b = h2Out;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(((b ^ c) << 5) | ((b ^ c) >>> 27), 0x5bd1e995);
  }
  h1Out = a;
  h2Out = b;
}

export class SharedBuckets {
  private readonly i32: Int32Array;
  readonly f64: Float64Array;
  private readonly sketch: Float64Array;
  readonly slots: number;
  /** The hash of the bucket the last `find` looked for, for `holds`. */
  ha = 0;
  hb = 0;

  constructor(layout: SharedBucketsLayout) {
    this.slots = layout.slots;
    const tableBytes = (HEADER + layout.slots) * SLOT_I32 * 4;
    this.i32 = new Int32Array(layout.buffer, 0, tableBytes / 4);
    this.f64 = new Float64Array(layout.buffer, 0, tableBytes / 8);
    this.sketch = new Float64Array(layout.buffer, tableBytes, layout.sketchCells);
  }

  /** Int32 index of slot `s`'s first cell. */
  private base(s: number): number {
    return (s + HEADER) * SLOT_I32;
  }

  /** Float64 index of cell `c` of slot `s`. */
  f(s: number, c: number): number {
    return (s + HEADER) * SLOT_F64 + c;
  }

  /**
   * The slot holding the bucket `tag`+`id` (claimed, full or from the sketch, if it
   * has none), not locked: `lock` it, then check `holds` (another thread may have
   * taken the slot over between the two).
   */
  find(tag: string, id: string, now: number, burst: number, rate: number): number {
    hashOf(tag, id);
    const a = h1Out;
    const b = h2Out;
    this.ha = a;
    this.hb = b;
    const home = (a >>> 0) % this.slots;
    const i = this.i32;
    for (let k = 0; k < WINDOW; k++) {
      let s = home + k;
      if (s >= this.slots) s -= this.slots;
      const x = this.base(s);
      if (Atomics.load(i, x + H1) === a && Atomics.load(i, x + H2) === b) return s;
    }
    return this.claim(a, b, home, now, burst, rate);
  }

  holds(s: number, a: number, b: number): boolean {
    const x = this.base(s);
    return this.i32[x + H1] === a && this.i32[x + H2] === b;
  }

  private claim(a: number, b: number, home: number, now: number, burst: number, rate: number): number {
    const i = this.i32;
    const f = this.f64;
    lock(i, 0);
    try {
      // Claims are one at a time: look again, another thread may have claimed it meanwhile.
      let victim = -1;
      let soonest = Number.POSITIVE_INFINITY;
      for (let k = 0; k < WINDOW; k++) {
        let s = home + k;
        if (s >= this.slots) s -= this.slots;
        const x = this.base(s);
        const h1 = Atomics.load(i, x + H1);
        const h2 = Atomics.load(i, x + H2);
        if (h1 === a && h2 === b) return s;
        if (victim >= 0 && soonest === Number.NEGATIVE_INFINITY) continue;
        if (h2 === 0) {
          victim = s;
          soonest = Number.NEGATIVE_INFINITY;
          continue;
        }
        const fullAt = this.fullAt(s);
        if (fullAt < soonest) {
          soonest = fullAt;
          victim = s;
        }
      }
      const s = victim;
      const x = this.base(s);
      lock(i, x + LOCK);
      try {
        if (soonest > now) {
          // Every bucket of the window is draining: the one full soonest goes into the sketch.
          const cell = (i[x + H1] as number) >>> 0;
          this.foldIntoSketch(cell, soonest);
        }
        const fullAt = this.sketch[(a >>> 0) % this.sketch.length] as number;
        Atomics.store(i, x + H1, a);
        Atomics.store(i, x + H2, b);
        i[x + Q_LEVEL] = 0;
        i[x + Q_COUNT] = 0;
        f[this.f(s, TOKENS)] = fullAt > now ? Math.max(0, burst - (fullAt - now) * rate) : burst;
        f[this.f(s, T)] = now;
        f[this.f(s, BURST)] = burst;
        f[this.f(s, RATE)] = rate;
        f[this.f(s, Q_WIN)] = -1;
      } finally {
        unlock(i, x + LOCK);
      }
      return s;
    } finally {
      unlock(i, 0);
    }
  }

  private foldIntoSketch(h1: number, fullAt: number): void {
    const c = h1 % this.sketch.length;
    if (fullAt > (this.sketch[c] as number)) this.sketch[c] = fullAt;
  }

  /** When slot `s`'s bucket is full again (and its quota window over): until then it is not free. */
  private fullAt(s: number): number {
    const f = this.f64;
    const rate = f[this.f(s, RATE)] as number;
    const full =
      (f[this.f(s, T)] as number) + ((f[this.f(s, BURST)] as number) - (f[this.f(s, TOKENS)] as number)) / rate;
    return Math.max(full, f[this.f(s, Q_WIN)] as number);
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
    for (let s = 0; s < this.slots; s++) if (this.i32[this.base(s) + H2] !== 0 && this.fullAt(s) > now) n++;
    return n;
  }

  /** Empties every slot whose bucket is full by `now` (the same as no bucket). */
  sweep(now: number): number {
    let removed = 0;
    for (let s = 0; s < this.slots; s++) {
      const x = this.base(s);
      if (Atomics.load(this.i32, x + H2) === 0 || this.fullAt(s) > now) continue;
      lock(this.i32, 0);
      lock(this.i32, x + LOCK);
      if (this.i32[x + H2] !== 0 && this.fullAt(s) <= now) {
        Atomics.store(this.i32, x + H1, 0);
        Atomics.store(this.i32, x + H2, 0);
        removed++;
      }
      unlock(this.i32, x + LOCK);
      unlock(this.i32, 0);
    }
    return removed;
  }
}

/** Spins this many times before sleeping on a contended lock. */
const SPINS = 100;

/**
 * A mutex on one Int32 cell (0 free, 1 held, 2 held with waiters), after Drepper's
 * "Futexes are tricky": uncontended, one compare-and-swap to take and one to give.
 */
function lock(i: Int32Array, at: number): void {
  let c = Atomics.compareExchange(i, at, 0, 1);
  if (c === 0) return;
  for (let n = 0; n < SPINS; n++) {
    if (Atomics.load(i, at) === 0) {
      c = Atomics.compareExchange(i, at, 0, 1);
      if (c === 0) return;
    }
  }
  if (c !== 2) c = Atomics.exchange(i, at, 2);
  while (c !== 0) {
    Atomics.wait(i, at, 2, 1);
    c = Atomics.exchange(i, at, 2);
  }
}

function unlock(i: Int32Array, at: number): void {
  if (Atomics.sub(i, at, 1) !== 1) {
    Atomics.store(i, at, 0);
    Atomics.notify(i, at, 1);
  }
}
