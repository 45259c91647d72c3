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
 * A bucket evicted with a live quota window folds its count into a second sketch, count-min
 * style: two rows of cells, each holding the end of the window it counts, the largest
 * count folded in for it, and whose that count is (a fingerprint of the hash) with the
 * quota level that bucket had raised; a cell of a window over is taken over. A key's
 * bucket claimed in a window starts from its cells: its own count and level where a cell
 * is still its own; else the smaller count of the two (none if a cell is of an earlier
 * window) at level 0, its own count or more when other buckets share both its cells, so
 * a warning may come early, never late. A decision reads and writes both sketches under
 * the claim lock only, two cells of each at most.
 *
 * A decision does bounded work whatever the names: `acquire` probes the window at
 * most twice (once without the claim lock, once under it) and returns the slot
 * locked; under the claim lock no slot changes hands, so nothing is retried. The
 * second bucket of a decision never evicts the first.
 *
 * A wall clock stepped back (NTP correcting a fast clock) makes no bucket wait for it
 * to get back to the instants the table holds: a bucket's last-refill time is taken back
 * to now (its tokens kept), its debt in the sketch is kept as long as it was (the sketch
 * keeps its own time, `debtShift`), so nothing waits longer than a bucket empty now would;
 * a quota count whose window ends after now's goes on in now's window. A step of up to
 * CLOCK_STEP_MS is waited out as before: one thread's clock reading a moment older than
 * another's is no step.
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
import { CLOCK_STEP_MS, refilledFrom } from './buckets.js';
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
/** Rows of the quota sketch; each has `quotaRowCells(sketchCells)` cells of 16 bytes (window end; count, owner). */
const QUOTA_ROWS = 2;
/**
 * A quota cell's owner: a fingerprint of the hash's first word (bit 2 set: never 0, 0 is
 * "nobody's") with the quota level its count raised in bits 0 and 1 (THRESHOLDS: 0 to 2).
 */
const owner = (a: number, level: number): number => (a & ~7) | 4 | Math.min(level, 3);
const OWNER_MASK = ~3;
/** Cells of a quota sketch row: the quota sketch takes as many bytes as the debt sketch. */
export const quotaRowCells = (sketchCells: number): number => Math.max(1, Math.floor(sketchCells / 4));
/** Cells of the whole quota sketch. */
export const quotaCells = (sketchCells: number): number => QUOTA_ROWS * quotaRowCells(sketchCells);
/** Slots searched from a bucket's home. */
export const WINDOW = 16;
/**
 * The header: the claim lock (Int32 0), the hash seed (Int32 1 and 2), the count of
 * buckets ever put in a slot (Int32 3), the debt sketch's shift and the latest instant
 * of its time a claim saw (Float64 2 and 3: `debtShift`), padding up to one slot.
 */
const HEADER = 1;
const SEED0 = 1;
const SEED1 = 2;
const CLAIMS = 3;
const SHIFT = 2;
const SEEN = 3;

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
  /**
   * The length of the quota window counted in this bucket (ms), if it counts one: a
   * claim starts its count from the quota sketch. 0 or absent: none (an address's).
   */
  windowMs?: number;
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
  const bytes = quotaOffset(slots, sketchCells) + quotaCells(sketchCells) * 16;
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

/** Where the quota sketch begins: after the slots, the debt sketch and the bitmap, on 8 bytes. */
const quotaOffset = (slots: number, sketchCells: number): number =>
  Math.ceil(((HEADER + slots) * SLOT_I32 * 4 + sketchCells * 8 + usedWords(slots) * 4) / 8) * 8;

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
  /** The quota sketch, cell `c` in Float64 `2c` (the end of the window it counts) and Int32 `4c+2`, `4c+3` (count, owner). */
  private readonly qf: Float64Array;
  private readonly qi: Int32Array;
  private readonly qRow: number;
  /** Cells of the quota sketch. */
  readonly quotaCells: number;
  /** The last `quotaEstimate`: a count and the quota level raised at it. */
  private qCount = 0;
  private qLevel = 0;
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
    this.qRow = quotaRowCells(layout.sketchCells);
    this.quotaCells = QUOTA_ROWS * this.qRow;
    const q = quotaOffset(layout.slots, layout.sketchCells);
    this.qf = new Float64Array(layout.buffer, q, 2 * this.quotaCells);
    this.qi = new Int32Array(layout.buffer, q, 4 * this.quotaCells);
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
   * folded into the sketch (and its quota count into the quota sketch). A bucket taken
   * over starts from the sketches. Deterministic, one probe of the window (and two cells
   * of each sketch), never waits but on the victim's lock.
   */
  private findOrClaim(a: number, b: number, home: number, r: BucketRef, now: number, keep: number): number {
    const i = this.i32;
    const f = this.f64;
    let victim = -1;
    let soonest = Number.POSITIVE_INFINITY;
    const shift = this.debtShift(now);
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
      const fullAt = h2 === 0 ? Number.NEGATIVE_INFINITY : this.fullAt(s, now);
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
      if (Atomics.load(i, x + H2) !== 0 && this.fullAt(s, now) > now) {
        const refilledAt = this.refilledAt(s, now);
        if (refilledAt > now) this.foldIntoSketch(Atomics.load(i, x + H2), refilledAt + shift);
        // Its quota count too, while its window lasts: claimed again in it, it goes on counting.
        const qwin = f[this.f(s, Q_WIN)] as number;
        const count = i[x + Q_COUNT] as number;
        if (qwin > now && count > 0) {
          this.foldQuota(i[x + H1] as number, i[x + H2] as number, qwin, count, i[x + Q_LEVEL] as number, now);
        }
        tableStats.evictions++;
      }
      const owed = (this.sketch[this.cell(b)] as number) - shift;
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
      const windowMs = r.windowMs ?? 0;
      if (windowMs > 0) {
        // A key's bucket evicted earlier in this window: its count and level, or more (a collision).
        const end = now - (now % windowMs) + windowMs;
        this.quotaEstimate(a, b, end);
        if (this.qCount > 0) {
          f[this.f(s, Q_WIN)] = end;
          i[x + Q_COUNT] = this.qCount;
          i[x + Q_LEVEL] = this.qLevel;
        }
      }
    } finally {
      this.unlock(s);
    }
    return s;
  }

  /**
   * Cell `row` of the quota sketch for bucket `a`,`b`: the first row from the hash's second
   * word (as the debt sketch), the second from both words mixed (no bucket shares both
   * cells with the buckets of its table window more than by chance).
   */
  private quotaCell(row: number, a: number, b: number): number {
    if (row === 0) return (b >>> 1) % this.qRow;
    return this.qRow + ((Math.imul(a ^ Math.imul(b, 0x9e3779b1), 0x85ebca6b) >>> 0) % this.qRow);
  }

  /**
   * Folds an evicted bucket's quota count and level for the window ending at `end` into
   * its cells (under the claim lock). A cell of a window over by `now` is taken over. Else
   * it keeps the later end (an end moved on is owned by nobody: a policy of another length)
   * and the larger count: a cell never under-counts a fold of its window. The bucket owns
   * (says its level in) every cell of its window it owned or nobody owned, and if none, it
   * takes the first of its window from another bucket: the last bucket folded always owns one.
   */
  private foldQuota(a: number, b: number, end: number, count: number, level: number, now: number): void {
    const qf = this.qf;
    const qi = this.qi;
    const mine = owner(a, level);
    let owned = false;
    let other = -1;
    for (let row = 0; row < QUOTA_ROWS; row++) {
      const c = this.quotaCell(row, a, b);
      const e = qf[2 * c] as number;
      if (!(e > now)) {
        qf[2 * c] = end;
        qi[4 * c + 2] = count;
        qi[4 * c + 3] = mine;
        owned = true;
        continue;
      }
      if (end > e) {
        qf[2 * c] = end;
        qi[4 * c + 3] = 0;
      }
      if (count > (qi[4 * c + 2] as number)) qi[4 * c + 2] = count;
      const tag = qi[4 * c + 3] as number;
      if (qf[2 * c] !== end) {
        // Its own cell of a window ending later (folded before the clock stepped back across
        // its window's end; that count went on in now's window): the higher level is kept,
        // so a warning raised is not raised again.
        if (tag !== 0 && (tag & OWNER_MASK) === (mine & OWNER_MASK)) {
          if ((tag & 3) < (mine & 3)) qi[4 * c + 3] = mine;
          owned = true;
        }
        continue;
      }
      if (tag === 0 || (tag & OWNER_MASK) === (mine & OWNER_MASK)) {
        qi[4 * c + 3] = mine;
        owned = true;
      } else if (other < 0) other = c;
    }
    if (!owned && other >= 0) qi[4 * other + 3] = mine;
  }

  /**
   * The count and level bucket `a`,`b` had in the window ending at `end` when it was
   * evicted, or more (`qCount`, `qLevel`; under the claim lock): the smaller count of its
   * two cells (0 if either is of an earlier window: it was not evicted in this one), more
   * than its own only when other buckets share both its cells, so a warning may come
   * early, never late. Its level is the highest a cell it owns says (of this window, or of
   * a later one: the clock stepped back across its end, and the count and the warnings
   * raised go on in now's window, neither lost nor raised again); owning none (it was not
   * evicted, or other buckets took both cells over), 0: thresholds below the count are
   * raised at its next use (early).
   */
  private quotaEstimate(a: number, b: number, end: number): void {
    const qf = this.qf;
    const qi = this.qi;
    const mine = owner(a, 0) & OWNER_MASK;
    let count = Number.POSITIVE_INFINITY;
    let level = 0;
    for (let row = 0; row < QUOTA_ROWS; row++) {
      const c = this.quotaCell(row, a, b);
      const e = qf[2 * c] as number;
      const n = e >= end ? (qi[4 * c + 2] as number) : 0;
      if (n < count) count = n;
      const tag = qi[4 * c + 3] as number;
      if (e >= end && tag !== 0 && (tag & OWNER_MASK) === mine && (tag & 3) > level) level = tag & 3;
    }
    this.qCount = count;
    this.qLevel = level;
  }

  /** Cell `c` of the quota sketch (for a snapshot; read as is): the end of its window, its count and owner. */
  quotaCellAt(c: number, out: { end: number; count: number; owner: number }): void {
    out.end = this.qf[2 * c] as number;
    out.count = this.qi[4 * c + 2] as number;
    out.owner = this.qi[4 * c + 3] as number;
  }

  /** Sets cell `c` of the quota sketch (a restore, before any decision). */
  setQuotaCell(c: number, end: number, count: number, owner: number): void {
    this.qf[2 * c] = end;
    this.qi[4 * c + 2] = count;
    this.qi[4 * c + 3] = owner;
  }

  /**
   * A bucket's sketch cell, from its hash's second word (the first places it in the table:
   * buckets sharing a window share no cell for it); that word's low bit is always 1.
   */
  private cell(h2: number): number {
    return (h2 >>> 1) % this.sketch.length;
  }

  /** Folds `fullAt`, in the sketch's time (`debtShift`), into `h2`'s cell: the later of the two. */
  private foldIntoSketch(h2: number, fullAt: number): void {
    const c = this.cell(h2);
    if (fullAt > (this.sketch[c] as number)) this.sketch[c] = fullAt;
  }

  /**
   * The debt sketch's shift at `now` (under the claim lock, or before any decision): a
   * cell holds an instant of the sketch's time, the wall clock plus the shift. The sketch's
   * time goes on from the latest instant a claim saw when the wall clock is found stepped
   * back (by more than CLOCK_STEP_MS): the shift grows by the step, and every debt folded
   * before it is as long as it was, never a step longer (an hour of refusals for a key
   * whose bucket, or a bucket sharing its cell, was evicted before a step back of an hour).
   * A step found late (no claim for a while before it) leaves a debt at most as long as
   * its bucket's from empty, since every fold was at or before the latest instant seen.
   */
  private debtShift(now: number): number {
    const f = this.f64;
    let shift = f[SHIFT] as number;
    const at = now + shift;
    const seen = f[SEEN] as number;
    if (seen - at > CLOCK_STEP_MS) {
      shift += seen - at;
      f[SHIFT] = shift;
    } else if (at > seen) f[SEEN] = at;
    return shift;
  }

  /**
   * A restored table's latest bucket time `at` (of the clock that saved it), before its
   * debts are set and its buckets put back: a clock stepped back since is found at `now`.
   */
  resumeClock(at: number, now: number): void {
    if (Number.isFinite(at) && at > (this.f64[SEEN] as number)) this.f64[SEEN] = at;
    this.debtShift(now);
  }

  /**
   * The shift a claim at `now` would find (`debtShift`, nothing written): a snapshot's
   * debts are a cell less it, on the wall clock (read as is, without the claim lock).
   */
  debtShiftAt(now: number): number {
    const shift = this.f64[SHIFT] as number;
    const seen = this.f64[SEEN] as number;
    return seen - (now + shift) > CLOCK_STEP_MS ? seen - now : shift;
  }

  /**
   * The latest instant a claim saw (every debt was folded at or before it), on the wall
   * clock at `now` as `debtShiftAt` reads it: the time a snapshot's debts are of.
   */
  clockAt(now: number): number {
    return (this.f64[SEEN] as number) - this.debtShiftAt(now);
  }

  /** When slot `s`'s bucket is full again (and its quota window over) at `now`: until then it is not free. */
  fullAt(s: number, now: number): number {
    return Math.max(this.refilledAt(s, now), this.f64[this.f(s, Q_WIN)] as number);
  }

  /**
   * When slot `s`'s bucket holds its burst again, as its refill at `now` would leave it (a
   * last-refill time after a clock stepped back is taken back to `now`): its debt, what
   * an eviction folds into the sketch, never more than its bucket from empty at `now`.
   */
  private refilledAt(s: number, now: number): number {
    const f = this.f64;
    const rate = f[this.f(s, RATE)] as number;
    const t = refilledFrom(f[this.f(s, T)] as number, now);
    return t + ((f[this.f(s, BURST)] as number) - (f[this.f(s, TOKENS)] as number)) / rate;
  }

  lock(s: number): void {
    lock(this.i32, this.base(s) + LOCK);
  }

  unlock(s: number): void {
    unlock(this.i32, this.base(s) + LOCK);
  }

  /**
   * Refills slot `s` (locked) to `now` under a policy of `burst` and `rate` (a changed
   * policy keeps the debt, under the new capacity), and returns its tokens. A clock
   * stepped back past its last refill (by more than CLOCK_STEP_MS) takes that time back
   * to `now`, adding nothing: it refills from now on, not from when the clock is back.
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
    } else f[tt] = refilledFrom(t, now);
    f[ti] = tokens;
    return tokens;
  }

  setTokens(s: number, tokens: number): void {
    this.f64[this.f(s, TOKENS)] = tokens;
  }

  /** The quota level already raised before the last use `countQuota` counted. */
  countedLevel = 0;

  /**
   * Counts one use against the quota window that `now` falls in (slot `s` locked);
   * returns the count, and puts the level already raised before this use in `countedLevel`.
   * A window ending after now's (the clock stepped back across its end) is taken back to
   * now's with its count and level: the uses counted are not lost, nor warned of again.
   */
  countQuota(s: number, now: number, windowMs: number): number {
    const x = this.base(s);
    const wi = this.f(s, Q_WIN);
    const end = now - (now % windowMs) + windowMs;
    const was = this.f64[wi] as number;
    if (was !== end) {
      this.f64[wi] = end;
      if (!(was > end)) {
        this.i32[x + Q_COUNT] = 0;
        this.i32[x + Q_LEVEL] = 0;
      }
    }
    const count = (this.i32[x + Q_COUNT] as number) + 1;
    this.i32[x + Q_COUNT] = count;
    this.countedLevel = this.i32[x + Q_LEVEL] as number;
    return count;
  }

  setQuotaLevel(s: number, level: number): void {
    this.i32[this.base(s) + Q_LEVEL] = level;
  }

  /** Buckets held: slots in use whose bucket is not yet full again. */
  size(now: number): number {
    let n = 0;
    for (let s = this.nextUsed(0); s >= 0; s = this.nextUsed(s + 1))
      if (this.i32[this.base(s) + H2] !== 0 && this.fullAt(s, now) > now) n++;
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
   * left it empty is not looked at again (idle). A bucket left untouched since the clock
   * stepped back has its last-refill time taken back to `now`, as its next refill would:
   * it is full (and swept) once its debt is paid from then, not when the clock is back.
   */
  sweep(now: number): number {
    const claims = Atomics.load(this.i32, CLAIMS);
    if (claims === this.emptyAt) return 0;
    let removed = 0;
    let left = 0;
    for (let s = this.nextUsed(0); s >= 0; s = this.nextUsed(s + 1)) {
      const x = this.base(s);
      if (Atomics.load(this.i32, x + H2) === 0) continue;
      if (this.fullAt(s, now) > now) {
        left++;
        const ti = this.f(s, T);
        const t = this.f64[ti] as number;
        if (refilledFrom(t, now) !== t && tryLock(this.i32, x + LOCK, PASS_WAITS)) {
          this.f64[ti] = refilledFrom(this.f64[ti] as number, now);
          unlock(this.i32, x + LOCK);
        }
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
      if (this.i32[x + H2] !== 0 && this.fullAt(s, now) <= now) {
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
   * is full again by `now` (the same as no bucket). A last-refill time after a clock
   * stepped back reads as `now`, as a refill would leave it.
   */
  read(s: number, now: number, i32Out: Int32Array, f64Out: Float64Array): boolean {
    const x = this.base(s);
    if (Atomics.load(this.i32, x + H2) === 0) return false;
    // A slot held past PASS_WAITS (a stalled or dead holder) is read as is: at most one decision old.
    const locked = tryLock(this.i32, x + LOCK, PASS_WAITS);
    const held = this.i32[x + H2] !== 0 && this.fullAt(s, now) > now;
    if (held) {
      for (let c = 0; c < 4; c++) i32Out[c] = this.i32[x + H1 + c] as number;
      for (let c = 0; c < 5; c++) f64Out[c] = this.f64[this.f(s, TOKENS + c)] as number;
      // On the wall clock, as the debts are: a last refill after a clock stepped back is now.
      f64Out[1] = refilledFrom(f64Out[1] as number, now);
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
   * Puts a snapshotted bucket back (at start, before any decision; after `resumeClock`): in
   * its window if a slot is free, else into the sketches (its debt, its quota count while
   * its window lasts at `now`), so a restore can only make limits stricter. A last-refill
   * time after `now` (the clock stepped back since the save) is taken back to `now`, as a refill does.
   */
  restore(i32In: Int32Array, f64In: Float64Array, now: number): void {
    const a = i32In[0] as number;
    const b = (i32In[1] as number) | 1;
    f64In[1] = refilledFrom(f64In[1] as number, now);
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
    if (!Number.isNaN(full)) this.foldIntoSketch(b, full + (this.f64[SHIFT] as number));
    const qwin = f64In[4] as number;
    const count = i32In[3] as number;
    if (qwin > now && count > 0) this.foldQuota(a, b, qwin, count, i32In[2] as number, now);
    Atomics.add(this.i32, CLAIMS, 1);
  }
}
