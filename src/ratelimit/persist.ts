/**
 * A single gateway's buckets and quota windows outlive a restart (DESIGN, Rate limits):
 * the control thread writes the shared table's live buckets (those not yet full again)
 * and the sketch's pending debts to `DATA_DIR` every few seconds when they changed, off
 * the request path, and at a clean stop; the next start reads them back before the first
 * decision. A crash loses at most the spending of those few seconds.
 *
 * The file is small (56 bytes a live bucket, 12 a pending debt, 20 a quota sketch cell of a
 * window still running), written whole to a temporary file (mode
 * 0600), flushed, then renamed over the old one: a reader sees the old file or the new,
 * never half of one. It holds the table's hash seed too (buckets are found by a hash
 * keyed with it, and the names behind the hashes are not kept), so the seed lives as
 * long as the data directory: a secret in a file only the gateway's user can read,
 * like the rest of `DATA_DIR`.
 *
 * Its header: "WGB1", the seed (two words), the sketch's size, the counts of buckets,
 * debts and quota cells; then those. The quota cells' count was a 0 before the quota
 * sketch, so an older file reads as one with none (its quota sketch empty); an older
 * gateway refuses a file holding some by its length (logged, fresh buckets).
 *
 * A file holding debts ends them with two records of a debt's shape whose indices no
 * sketch has (an older gateway passes them by, as it does any index past its sketch):
 * the file's clock (the latest instant a claim saw, every debt folded at or before it)
 * and its latest debt. A start reads its clock stepped back since from the first (not
 * only from the buckets' times: a file may hold debts and no bucket), and holds every
 * debt to the second: no debt it holds is later, so a later one is damage.
 */
import { lstatSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/index.js';
import { replaceFile, replaceFileLater } from '../durable.js';
import type { Logger } from '../log.js';
import { readBounded } from '../tls/files.js';
import { refilledFrom } from './buckets.js';
import { EPS } from './limiter.js';
import { allocateBuckets, quotaCells, SharedBuckets, type SharedBucketsLayout, seedOf } from './shared-buckets.js';

export const BUCKETS_FILE = 'ratelimit-buckets.bin';
/** How often the table is written while serving. */
export const SAVE_EVERY_MS = 5_000;
const MAGIC = 0x57474231; // "WGB1"
const HEAD = 28;
const ENTRY = 4 * 4 + 5 * 8;
const CELL = 4 + 8;
/** A quota sketch cell: its index, the end of its window, count, owner (and its level). */
const QCELL = 4 + 8 + 4 + 4;
/**
 * The fewest tokens a bucket holds: a decision takes a token only from a bucket holding
 * at least 1 - EPS (limiter.ts), and a claim starts from 0 or more.
 */
const LEAST_TOKENS = -EPS;
/** The debt records' indices past any sketch (at most 16,777,216 cells): the file's clock, its latest debt. */
const CLOCK_RECORD = 0xffffffff;
const LATEST_RECORD = 0xfffffffe;

/** The table's live buckets, pending debts and quota counts, as the file holds them. */
export function encodeBuckets(layout: SharedBucketsLayout, now: number): Buffer {
  const t = new SharedBuckets(layout);
  const i32 = new Int32Array(4);
  const f64 = new Float64Array(5);
  // One buffer, grown by doubling: no allocation per bucket (a busy table holds many).
  let out = Buffer.allocUnsafe(HEAD + 1024 * ENTRY);
  let at = HEAD;
  const room = (n: number) => {
    if (at + n <= out.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(out.length * 2, at + n));
    out.copy(bigger, 0, 0, at);
    out = bigger;
  };
  let entries = 0;
  for (let s = t.nextUsed(0); s >= 0; s = t.nextUsed(s + 1)) {
    if (!t.read(s, now, i32, f64)) continue;
    room(ENTRY);
    for (let c = 0; c < 4; c++) out.writeInt32LE(i32[c] as number, at + c * 4);
    for (let c = 0; c < 5; c++) out.writeDoubleLE(f64[c] as number, at + 16 + c * 8);
    at += ENTRY;
    entries++;
  }
  let cells = 0;
  // The debts on the wall clock, as the buckets' times are (a clock stepped back: SharedBuckets.debtShift).
  const shift = t.debtShiftAt(now);
  let latest = Number.NEGATIVE_INFINITY;
  const debt = (c: number, until: number) => {
    room(CELL);
    out.writeUInt32LE(c, at);
    out.writeDoubleLE(until, at + 4);
    at += CELL;
    cells++;
  };
  for (let c = 0; c < t.sketch.length; c++) {
    const until = (t.sketch[c] as number) - shift;
    if (!(until > now)) continue;
    debt(c, until);
    if (until > latest) latest = until;
  }
  // The clock the debts are of, and the latest of them (decodeBuckets); unchanged while
  // no claim comes, so an idle table's file stays the same bytes.
  if (cells > 0) {
    debt(CLOCK_RECORD, t.clockAt(now));
    debt(LATEST_RECORD, latest);
  }
  // The quota sketch's cells of a window still running (each read as is: at most one fold old).
  const q = { end: 0, count: 0, owner: 0 };
  let qcells = 0;
  for (let c = 0; c < t.quotaCells; c++) {
    t.quotaCellAt(c, q);
    if (!(q.end > now && q.count > 0)) continue;
    room(QCELL);
    out.writeUInt32LE(c, at);
    out.writeDoubleLE(q.end, at + 4);
    out.writeInt32LE(q.count, at + 12);
    out.writeInt32LE(q.owner, at + 16);
    at += QCELL;
    qcells++;
  }
  const head = out.subarray(0, HEAD);
  const [k0, k1] = seedOf(layout);
  head.writeUInt32LE(MAGIC, 0);
  head.writeInt32LE(k0, 4);
  head.writeInt32LE(k1, 8);
  head.writeUInt32LE(layout.sketchCells, 12);
  head.writeUInt32LE(entries, 16);
  head.writeUInt32LE(cells, 20);
  head.writeUInt32LE(qcells, 24);
  return out.subarray(0, at);
}

/**
 * A table of `slots` and `sketchCells` holding what `file` holds (its seed, its buckets
 * still draining at `now`, its debts and quota counts); null if the bytes are not such a file.
 * A bucket out of the range a bucket can be in is put back within it, or not at all
 * (`damaged.buckets` counts them): a restored bucket is never worse than its policy allows.
 * So is a debt (`damaged.debts`): one later than the file's latest is taken as that (no
 * key owes longer than the file's table had any key owe), one at no date is dropped.
 */
export function decodeBuckets(
  bytes: Buffer,
  slots: number,
  sketchCells: number,
  now: number,
  damaged?: { buckets: number; debts?: number },
): SharedBucketsLayout | null {
  if (bytes.length < HEAD || bytes.readUInt32LE(0) !== MAGIC) return null;
  const n = bytes.readUInt32LE(16);
  const m = bytes.readUInt32LE(20);
  // 0 in a file written before the quota sketch.
  const q = bytes.readUInt32LE(24);
  if (bytes.length !== HEAD + n * ENTRY + m * CELL + q * QCELL) return null;
  const layout = allocateBuckets(slots, sketchCells, [bytes.readInt32LE(4), bytes.readInt32LE(8)]);
  const t = new SharedBuckets(layout);
  const i32 = new Int32Array(4);
  const f64 = new Float64Array(5);
  const entry = (k: number) => {
    const at = HEAD + k * ENTRY;
    for (let c = 0; c < 4; c++) i32[c] = bytes.readInt32LE(at + c * 4);
    for (let c = 0; c < 5; c++) f64[c] = bytes.readDoubleLE(at + 16 + c * 8);
  };
  // The file's clock and its latest debt (absent from an older gateway's file: NaN).
  let badDebts = 0;
  let clock = Number.NaN;
  let latestDebt = Number.NaN;
  for (let k = 0; k < m; k++) {
    const at = HEAD + n * ENTRY + k * CELL;
    const c = bytes.readUInt32LE(at);
    if (c !== CLOCK_RECORD && c !== LATEST_RECORD) continue;
    const v = bytes.readDoubleLE(at + 4);
    if (!isDate(v)) badDebts++;
    else if (c === CLOCK_RECORD) clock = v;
    else latestDebt = v;
  }
  // Every debt ends after the clock it was written at (a clock past them is no clock's).
  if (clock > latestDebt) {
    clock = Number.NaN;
    badDebts++;
  }
  // The sketches' cells are the hash modulo their size: kept only if the size is the same.
  // Set before the buckets are put back: a bucket finding no slot folds into them.
  if (bytes.readUInt32LE(12) === sketchCells) {
    // The debts as the file's clock says (the sketch's time until `resumeClock` below).
    for (let k = 0; k < m; k++) {
      const at = HEAD + n * ENTRY + k * CELL;
      const c = bytes.readUInt32LE(at);
      if (c === CLOCK_RECORD || c === LATEST_RECORD) continue;
      let until = bytes.readDoubleLE(at + 4);
      // No cell, or no date (1e300 would have every key of its cell refused its burst for ever).
      if (c >= sketchCells || !isDate(until)) {
        badDebts++;
        continue;
      }
      // Later than any debt the file's table held (bytes changed on disk): every key of its
      // cell would start empty at each claim until then, years maybe. Taken as the latest.
      if (until > latestDebt) {
        until = latestDebt;
        badDebts++;
      }
      if (until > now) t.sketch[c] = until;
    }
    for (let k = 0; k < q; k++) {
      const at = HEAD + n * ENTRY + m * CELL + k * QCELL;
      const c = bytes.readUInt32LE(at);
      const end = bytes.readDoubleLE(at + 4);
      const count = bytes.readInt32LE(at + 12);
      if (c < t.quotaCells && Number.isFinite(end) && end > now && count > 0) {
        t.setQuotaCell(c, end, count, bytes.readInt32LE(at + 16));
      }
    }
  }
  // The file's clock at its last decision: stepped back since (by more than CLOCK_STEP_MS),
  // the debts just read are taken back by as much, and the buckets' times to now (restore).
  // Its clock record if it has one (a file of debts and no bucket has no bucket time),
  // else its latest bucket time (an older gateway's file).
  let latest = Number.isNaN(clock) ? Number.NEGATIVE_INFINITY : clock;
  for (let k = 0; k < n; k++) {
    entry(k);
    if (wellFormed(i32, f64) && (f64[1] as number) > latest) latest = f64[1] as number;
  }
  t.resumeClock(latest, now);
  let outOfRange = 0;
  for (let k = 0; k < n; k++) {
    entry(k);
    // Numbers no gateway writes (bytes changed on disk, a buggy writer): no bucket, as if full again.
    if (!wellFormed(i32, f64)) {
      outOfRange++;
      continue;
    }
    // A deeper debt would have its key refused for as long as it says (a million tokens
    // owed at one a second: eleven days of 429s): it is taken as a bucket just emptied.
    if ((f64[0] as number) < LEAST_TOKENS) {
      f64[0] = LEAST_TOKENS;
      outOfRange++;
    }
    if (plausible(f64, now)) t.restore(i32, f64, now);
  }
  if (damaged) {
    damaged.buckets = outOfRange;
    damaged.debts = badDebts;
  }
  return layout;
}

/** The largest time a Date holds (ECMA-262 §21.4.1.1), in ms from the epoch. */
const MAX_TIME = 8.64e15;

/** A time a Date can hold. */
const isDate = (v: number): boolean => Number.isFinite(v) && Math.abs(v) <= MAX_TIME;

/** Numbers a bucket can hold. */
function wellFormed(i32: Int32Array, f64: Float64Array): boolean {
  const [tokens, t, burst, rate, qwin] = f64 as unknown as number[];
  if (i32[1] === 0 || (i32[2] as number) < 0 || (i32[3] as number) < 0) return false;
  if (![tokens, t, burst, rate, qwin].every(Number.isFinite)) return false;
  // Times a Date can hold: one past them (1e300) would shift the debt sketch's clock for the whole run.
  if (Math.abs(t as number) > MAX_TIME || Math.abs(qwin as number) > MAX_TIME) return false;
  return (burst as number) > 0 && (rate as number) > 0 && (tokens as number) <= (burst as number);
}

/**
 * A well-formed bucket worth restoring: not yet full again at `now` (refilled from `now`
 * if its last refill is after it: the clock stepped back since the save).
 */
function plausible(f64: Float64Array, now: number): boolean {
  const [tokens, t, burst, rate, qwin] = f64 as unknown as number[];
  const full = refilledFrom(t as number, now) + ((burst as number) - (tokens as number)) / (rate as number);
  return Math.max(full, qwin as number) > now;
}

/** Writes `bytes` to `dir/name` atomically and durably (src/durable.ts's replaceFile). */
export function writeAtomic(dir: string, name: string, bytes: Buffer): void {
  replaceFile(join(dir, name), bytes);
}

/** The largest file a table of `slots` and `sketchCells` writes: every slot a live bucket, every cell a debt or a count. */
const largestFile = (slots: number, sketchCells: number): number =>
  HEAD + slots * ENTRY + (sketchCells + 2) * CELL + quotaCells(sketchCells) * QCELL;

/** Nothing at all at `file` (not even a dangling symlink): a first start. */
function absent(file: string): boolean {
  try {
    return lstatSync(file, { throwIfNoEntry: false }) === undefined;
  } catch {
    return false;
  }
}

/**
 * The table saved in `storage.data_dir`, or undefined (none; or unreadable, damaged, no
 * regular file, or larger than this table's largest save: logged once, and a fresh table).
 * Buckets and debts out of range in a file otherwise whole are put back within it or
 * dropped (decodeBuckets), and that is logged once too.
 * Read through readBounded (non-blocking open, fstat): a FIFO or a device at that path,
 * or a symlink to one, is refused at once instead of holding up the start or being read
 * for ever. A file written by a larger table (`max_buckets` or `sketch_cells` lowered
 * since) and holding more than this one could is ignored too.
 */
export function restoredBuckets(
  cfg: Pick<Config, 'storage' | 'ratelimit'>,
  now: number,
  log: Logger,
): SharedBucketsLayout | undefined {
  const { max_buckets: slots, sketch_cells: sketchCells } = cfg.ratelimit;
  const file = join(cfg.storage.data_dir, BUCKETS_FILE);
  let bytes: Buffer;
  try {
    bytes = readBounded(file, BUCKETS_FILE, largestFile(slots, sketchCells));
  } catch (e) {
    // No file (a first start): nothing to restore, nothing to say.
    if (absent(file)) return undefined;
    log.warn('rate-limit buckets file unreadable: starting with fresh buckets', {
      file: BUCKETS_FILE,
      err: e as Error,
    });
    return undefined;
  }
  const damaged = { buckets: 0, debts: 0 };
  const layout = decodeBuckets(bytes, slots, sketchCells, now, damaged);
  if (!layout) log.warn('rate-limit buckets file unreadable: starting with fresh buckets', { file: BUCKETS_FILE });
  else if (damaged.buckets > 0 || damaged.debts > 0) {
    log.warn(
      'rate-limit buckets file holds buckets or debts out of range: restored as just emptied, full, or owing no later than its latest debt',
      { file: BUCKETS_FILE, buckets: damaged.buckets, debts: damaged.debts },
    );
  }
  return layout ?? undefined;
}

/**
 * Writes the table every `SAVE_EVERY_MS` and at close (after the edges have stopped: add
 * it right after the limiter), and only when what it would write differs from what it
 * last wrote: a gateway whose buckets wait out a quota window with no request coming
 * writes nothing (nothing would be lost by a crash meanwhile). `save` is what the timer
 * runs: true when it wrote the file.
 */
export function bucketsSaver(o: { layout: SharedBucketsLayout; dir: string; now: () => number; log: Logger }): {
  name: 'buckets-saver';
  save(): Promise<boolean>;
  close(): Promise<void>;
} {
  const save = () => {
    try {
      writeAtomic(o.dir, BUCKETS_FILE, encodeBuckets(o.layout, o.now()));
    } catch (e) {
      o.log.warn('rate-limit buckets not saved', { err: e as Error });
    }
  };
  // Every few seconds the write and its fsync run off the event loop (this may be the
  // thread serving requests, with threads: 1); one at a time.
  let writing: Promise<boolean> | null = null;
  // What the file holds as this saver last wrote it (null: not written yet, or the write failed).
  let written: Buffer | null = null;
  // The last save failed (and that was said).
  let failing = false;
  const saveSoon = (): Promise<boolean> => {
    if (writing) return writing.then(() => false);
    // Encoded every time (it goes through the slots in use only: microseconds for an idle
    // table). A claim count cannot stand in for it: a bucket that refilled while in its
    // slot is written as none, and its key's next spending claims nothing new.
    const bytes = encodeBuckets(o.layout, o.now());
    // The same buckets with the same numbers (no decision since, none full again): the
    // file already says this.
    if (written?.equals(bytes)) return Promise.resolve(false);
    written = null;
    writing = replaceFileLater(join(o.dir, BUCKETS_FILE), bytes)
      .then(() => {
        written = bytes;
        if (failing) o.log.info('rate-limit buckets saved again');
        failing = false;
        return true;
      })
      .catch((e: Error) => {
        // Said when saves begin to fail (a full disk), not at every save every 5 s after.
        if (!failing) o.log.warn('rate-limit buckets not saved; retried every 5 s, said again when saved', { err: e });
        failing = true;
        return false;
      })
      .finally(() => {
        writing = null;
      });
    return writing;
  };
  const timer = setInterval(() => void saveSoon(), SAVE_EVERY_MS);
  timer.unref();
  return {
    name: 'buckets-saver',
    save: saveSoon,
    close: async () => {
      clearInterval(timer);
      await writing;
      save();
    },
  };
}
