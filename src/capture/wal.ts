import {
  closeSync,
  existsSync,
  fdatasync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rm,
  rmSync,
  statSync,
  writeSync,
  writevSync,
} from 'node:fs';
import { join } from 'node:path';
import { replaceFile, syncDirLater } from '../durable.js';
import { randomBase62 } from '../ids.js';
import type { Logger } from '../log.js';
import { privateDir } from '../private-dir.js';
import { joinParts, type LineParts } from './wake-log.js';

/**
 * How rows become log lines and back; one line each, no newline inside. A line is
 * a string (without its newline), or, for rows that carry bytes, the line's parts
 * in order (newline included): text as strings, bytes as Buffers written as they
 * are without being copied.
 */
export interface WalCodec<T> {
  encode(row: T): string | LineParts;
  decode(line: string): T;
  /** False for a line an earlier version wrote: its segment is rewritten in the current form before it is read. */
  isCurrent?(line: string): boolean;
  /**
   * Called once a row's line is queued: drops from the row what the line now holds
   * and nothing else needs (a wake's bodies), so it is not kept until the batch is stored.
   */
  shed?(row: T): void;
}

const JSON_LINES: WalCodec<never> = { encode: (r) => JSON.stringify(r), decode: (l) => JSON.parse(l) as never };

export interface WalOptions {
  /** Rows are written to the log at most this long after they are appended (group commit). */
  syncIntervalMs: number;
  /** The log is fsynced this often (a power loss loses at most this much). */
  fsyncIntervalMs: number;
  /** Goes into the names of the segments this log writes (`….<tag>.wal`), so a reader can tell them from older ones. */
  tag?: string;
  /**
   * Rows of backlog segments the disk would not take (full, out of descriptors), kept in
   * memory to be written or inserted later: at most this many (past it they are dropped,
   * and the caller counts them). Default: none kept.
   */
  maxHeldRows?: number;
  /** And at most this many bytes of their lines (a wake's detail may be tens of KB). Default: no bound but the rows'. */
  maxHeldBytes?: number;
}

/** The active segment, sealed: what a batch's sink needs of it. */
export interface Sealed<T> {
  token: string;
  /** The segment's file, or null when a write of it failed (the file lacks rows). */
  file: string | null;
  /**
   * When a write failed: every row of the segment, read back from the lines written
   * before the failure and from those kept in memory since (null otherwise).
   */
  rows: T[] | null;
}

/** A sealed segment: one batch, named by its deduplication token. */
export interface Segment<T> {
  token: string;
  rows: T[];
  /**
   * The segment's file: exactly these rows, one whole line each (what an insert may read);
   * null while the disk will not take it (its rows are held in memory).
   */
  file: string | null;
}

const SUFFIX = '.wal';
/** A disk that keeps refusing the log's writes is said at most this often. */
const FAILURE_LOG_MS = 60_000;
/** Writes taken this long after the last failure: the disk is said to take them again. */
const RECOVERED_MS = 10_000;
/** Buffers one writev takes (below IOV_MAX). */
const IOV = 512;

/** A count said at most once a minute: what was added since it was last said, when it is time to say it. */
class EveryMinute {
  private saidAt = Number.NEGATIVE_INFINITY;
  private unsaid = 0;

  /** Adds `n`; the count to say now (then starts again from none), or 0 when it was said within the minute. */
  add(n: number, now: number): number {
    this.unsaid += n;
    if (now - this.saidAt < FAILURE_LOG_MS) return 0;
    this.saidAt = now;
    const said = this.unsaid;
    this.unsaid = 0;
    return said;
  }

  /** Nothing unsaid, and the next add is said at once. */
  reset(): void {
    this.saidAt = Number.NEGATIVE_INFINITY;
    this.unsaid = 0;
  }
}

/** Writes the buffers in order, whole: writev in groups, and the rest of any short write. */
function writeAll(fd: number, bufs: readonly Buffer[]): void {
  for (let i = 0; i < bufs.length; i += IOV) {
    const group = bufs.length <= IOV ? (bufs as Buffer[]) : bufs.slice(i, i + IOV);
    let total = 0;
    for (const b of group) total += b.length;
    const n = writevSync(fd, group);
    if (n < total) {
      // A short write (rare): the rest of the group, in order.
      const rest = Buffer.concat(group, total);
      for (let off = n; off < total; ) off += writeSync(fd, rest, off);
    }
  }
}

/**
 * The write-ahead log of one stream of rows (wakes, events or delivery outcomes),
 * and the spool of batches storage has not acknowledged: one mechanism.
 *
 * Every row is encoded once, as its log line, when it is appended; the lines
 * are written to the active segment at most `syncIntervalMs` after they were
 * appended (group commit: a timer armed by the first row after a write, then one
 * `writev` for everything appended meanwhile) and fsynced every `fsyncIntervalMs`.
 * A batch is the active segment, sealed: its file name carries the batch's
 * deduplication token, and the insert sends its lines as they were written. A
 * segment is removed only once storage has acknowledged it. Segments that are
 * not acknowledged (storage down) stay on disk as the backlog and are inserted
 * again, oldest first; so are all segments found at start (a crash), whose last
 * line may be torn: a line that does not parse is skipped and counted. The
 * directory's size is bounded by `maxBytes`; past it rows are refused (the caller
 * counts them as dropped).
 */
export class Wal<T> {
  private fd: number | null = null;
  private activeName = '';
  private pending: Buffer[] = [];
  /** Lines appended as strings since the last part in `pending`: made bytes once, when written. */
  private pendingText = '';
  private activeRows = 0;
  /** A write of the active segment failed: its file lacks rows, so no insert may read it. */
  private activeBroken = false;
  private activeBytes = 0;
  /** Bytes of the active segment's file that hold whole lines: everything written before a write failed. */
  private activeWritten = 0;
  /**
   * Lines of the active segment no write took: once a write fails, every later line
   * of the segment joins them, so its file keeps whole lines only.
   */
  private unwritten: Buffer[] = [];
  private seq = 0;
  private readonly prefix = `${Date.now().toString(36)}-${randomBase62(6)}`;
  private bytes = 0;
  private dirty = false;
  private syncing = false;
  /** Sealed segments on disk, not in flight: oldest first. */
  private readonly backlog: string[] = [];
  private readonly sizes = new Map<string, number>();
  /** The order segments of this run were sealed in (a batch kept late goes back to its place). */
  private readonly sealedAt = new Map<string, number>();
  private sealCount = 0;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly syncMs: number;
  private readonly tag: string;
  /**
   * The group commit's timer, armed by the first row appended after a write (an
   * idle log sets no timer at all, where an interval woke the process 100 times a
   * second per log).
   */
  private syncTimer: NodeJS.Timeout | null = null;
  private readonly onSync = (): void => {
    this.syncTimer = null;
    this.writePending();
  };
  /** Lines found torn or unreadable when segments were read back. */
  torn = 0;
  /** Segments an earlier run left (a crash): their batches were perhaps never seen by anyone. */
  private readonly inherited = new Set<string>();
  /** Rows of backlog segments whose files the disk would not take, by token (see WalOptions.maxHeldRows). */
  private readonly held = new Map<string, { rows: readonly T[]; bytes: number }>();
  private heldRows = 0;
  private heldBytes = 0;
  private readonly maxHeldRows: number;
  private readonly maxHeldBytes: number;
  /**
   * The log's disk refuses writes (full, gone, out of descriptors). Said at most once a
   * minute while it lasts (a nearly full disk takes one write and refuses the next), and
   * once when writes have been taken for 10 s again.
   */
  private failing = false;
  private lastFailureAt = 0;
  private readonly failures = new EveryMinute();
  /** Rows let go past the memory bound, said at most once a minute. */
  private readonly letGo = new EveryMinute();

  constructor(
    private readonly dir: string,
    private readonly maxBytes: number,
    opts: WalOptions,
    private readonly log: Logger,
    private readonly codec: WalCodec<T> = JSON_LINES as WalCodec<T>,
  ) {
    privateDir(dir);
    for (const f of readdirSync(dir).sort()) {
      if (f.endsWith('.tmp')) {
        rmSync(join(dir, f), { force: true });
        continue;
      }
      if (!f.endsWith(SUFFIX)) continue;
      const st = statSync(join(dir, f));
      if (!st.isFile()) {
        this.log.error('write-ahead log: an entry named like a segment is not a file, and is left alone', {
          segment: f,
        });
        continue;
      }
      const size = st.size;
      if (size === 0) {
        rmSync(join(dir, f), { force: true });
        continue;
      }
      this.backlog.push(f);
      this.inherited.add(f);
      this.sizes.set(f, size);
      this.bytes += size;
    }
    this.syncMs = opts.syncIntervalMs;
    this.tag = opts.tag ? `.${opts.tag}` : '';
    this.maxHeldRows = opts.maxHeldRows ?? 0;
    this.maxHeldBytes = opts.maxHeldBytes ?? Number.POSITIVE_INFINITY;
    const fsync = setInterval(() => this.fsync(), opts.fsyncIntervalMs);
    fsync.unref();
    this.timers.push(fsync);
  }

  /** Bytes on disk (and about to be), all segments. */
  get size(): number {
    return this.bytes;
  }

  /** Sealed segments waiting on disk (the backlog). */
  get length(): number {
    return this.backlog.length;
  }

  /**
   * Appends one row (hot path: one encoding and a string append; the write
   * happens within `syncIntervalMs`). False when the disk budget is spent.
   */
  append(row: T): boolean {
    const e = this.codec.encode(row);
    if (typeof e === 'string') {
      const n = Buffer.byteLength(e) + 1;
      if (this.bytes + n > this.maxBytes) return false;
      this.pendingText += `${e}\n`;
      this.account(n);
      this.codec.shed?.(row);
      return true;
    }
    let n = 0;
    for (const part of e) n += typeof part === 'string' ? Buffer.byteLength(part) : part.length;
    if (this.bytes + n > this.maxBytes) return false;
    for (const part of e) {
      if (typeof part === 'string') this.pendingText += part;
      else if (part.length > 0) {
        this.textToPending();
        this.pending.push(part);
      }
    }
    this.account(n);
    this.codec.shed?.(row);
    return true;
  }

  /** The string lines appended since the last part, as one part (keeps the order of lines). */
  private textToPending(): void {
    if (this.pendingText === '') return;
    this.pending.push(Buffer.from(this.pendingText));
    this.pendingText = '';
  }

  private account(n: number): void {
    this.bytes += n;
    this.activeRows++;
    this.activeBytes += n;
    if (this.syncTimer === null) {
      this.syncTimer = setTimeout(this.onSync, this.syncMs);
      this.syncTimer.unref();
    }
  }

  /** A row as its whole line of bytes (off the hot path: rewrites and adoption). */
  private line(row: T): Buffer {
    const e = this.codec.encode(row);
    return typeof e === 'string' ? Buffer.from(`${e}\n`) : joinParts(e);
  }

  private open(): number {
    if (this.fd === null) {
      this.activeName = `${String(Date.now()).padStart(14, '0')}-${this.prefix}-${this.seq++}${this.tag}${SUFFIX}`;
      const path = join(this.dir, this.activeName);
      this.fd = this.inDir(() => openSync(path, 'a', 0o600));
      // The segment's name survives a power loss too, not only the bytes its fdatasync makes durable.
      syncDirLater(this.dir);
    }
    return this.fd;
  }

  /** Runs `f`, which makes a file in the log's folder; a folder removed while running is made again first. */
  private inDir<R>(f: () => R): R {
    try {
      return f();
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || existsSync(this.dir)) throw e;
      privateDir(this.dir);
      this.log.error('write-ahead log: its folder was gone and has been made again', { dir: this.dir });
      return f();
    }
  }

  /** A write of the log failed: said when the disk begins to refuse, then at most once a minute. */
  private writeFailed(what: string, e: Error): void {
    const now = Date.now();
    this.failing = true;
    this.lastFailureAt = now;
    const failed = this.failures.add(1, now);
    if (failed === 0) return;
    this.log.error(
      `write-ahead log: ${what}; rows are kept in memory (within capture.max_buffered_rows) until the disk takes them`,
      { dir: this.dir, failed_writes: failed, err: e },
    );
  }

  /** A write of the log was taken: once none has failed for a while, that is said. */
  private writeTaken(): void {
    if (!this.failing || Date.now() - this.lastFailureAt < RECOVERED_MS) return;
    this.failing = false;
    this.failures.reset();
    this.log.info('write-ahead log: the disk takes writes again', { dir: this.dir });
  }

  /** Group commit: everything appended since the last write, in one write. */
  writePending(): void {
    this.textToPending();
    if (this.pending.length === 0) return;
    const lines = this.pending;
    this.pending = [];
    if (this.activeBroken) {
      for (const l of lines) this.unwritten.push(l);
      return;
    }
    try {
      writeAll(this.open(), lines);
      for (const l of lines) this.activeWritten += l.length;
      this.dirty = true;
      this.writeTaken();
    } catch (e) {
      this.activeBroken = true;
      for (const l of lines) this.unwritten.push(l);
      this.writeFailed('a write failed', e as Error);
    }
  }

  /**
   * The rows of a segment a write failed for: the whole lines its file holds, then
   * the lines kept in memory since. A line that does not decode is skipped and counted.
   */
  private recover(path: string, written: number, unwritten: readonly Buffer[]): T[] {
    const parts: Buffer[] = [];
    if (written > 0) {
      try {
        parts.push(readFileSync(path).subarray(0, written));
      } catch (e) {
        this.log.error('write-ahead log: the lines written before a failed write could not be read back', {
          path,
          err: e as Error,
        });
      }
    }
    for (const u of unwritten) parts.push(u);
    const rows: T[] = [];
    for (const line of Buffer.concat(parts).toString('utf8').split('\n')) {
      if (line === '') continue;
      try {
        rows.push(this.codec.decode(line));
      } catch {
        this.torn++;
      }
    }
    return rows;
  }

  private fsync(): void {
    if (!this.dirty || this.syncing || this.fd === null) return;
    this.dirty = false;
    this.syncing = true;
    fdatasync(this.fd, () => {
      this.syncing = false;
    });
  }

  /**
   * Seals the active segment: the batch of every row appended since the last
   * seal, or null when nothing was appended.
   */
  seal(): Sealed<T> | null {
    if (this.activeRows === 0) return null;
    this.writePending();
    this.activeRows = 0;
    const broken = this.activeBroken;
    this.activeBroken = false;
    const written = this.activeWritten;
    this.activeWritten = 0;
    const unwritten = this.unwritten;
    this.unwritten = [];
    const bytes = this.activeBytes;
    this.activeBytes = 0;
    const name = this.activeName;
    if (this.fd !== null) {
      const fd = this.fd;
      this.fd = null;
      // Durable before it is closed; the close waits for the sync, off this path.
      this.dirty = false;
      fdatasync(fd, () => {
        try {
          closeSync(fd);
        } catch (e) {
          // A file whose writes failed may not close either; never a throw from a callback.
          this.log.error('write-ahead log: a segment could not be closed', { segment: name, err: e as Error });
        }
      });
    }
    this.sizes.set(name, bytes);
    this.sealedAt.set(name, this.sealCount++);
    const path = join(this.dir, name);
    if (!broken) return { token: name, file: path, rows: null };
    return { token: name, file: null, rows: this.recover(path, written, unwritten) };
  }

  /** Storage acknowledged the segment: it goes (unlinked off the event loop: freeing a large file's pages takes a while). */
  acknowledge(token: string): void {
    rm(join(this.dir, token), { force: true }, (e) => {
      if (e)
        this.log.error('write-ahead log: an acknowledged segment could not be removed', { segment: token, err: e });
    });
    this.bytes -= this.sizes.get(token) ?? 0;
    this.sizes.delete(token);
    this.sealedAt.delete(token);
  }

  /**
   * Storage did not take the segment: it joins the backlog, to be inserted again in
   * order. `rows` are those of a segment a write failed for: its file is written
   * again whole with them, or, while the disk will not take it, they are held in
   * memory (up to maxHeldRows) until it does or storage takes them. Returns how many
   * rows had to be let go (none held past the bound): the caller counts them dropped.
   */
  keep(token: string, rows: readonly T[] | null = null): number {
    // In the order sealed: a batch whose insert was slow to fail goes before those sealed
    // behind it meanwhile (segments of an earlier run come first: they have no place).
    const at = this.sealedAt.get(token) ?? -1;
    let i = this.backlog.length;
    while (i > 0 && (this.sealedAt.get(this.backlog[i - 1] as string) ?? -1) > at) i--;
    this.backlog.splice(i, 0, token);
    if (rows === null || this.rewrite(token, rows)) return 0;
    const bytes = this.sizes.get(token) ?? 0;
    if (this.heldRows + rows.length <= this.maxHeldRows && this.heldBytes + bytes <= this.maxHeldBytes) {
      this.held.set(token, { rows, bytes });
      this.heldRows += rows.length;
      this.heldBytes += bytes;
      return 0;
    }
    this.backlog.splice(this.backlog.indexOf(token), 1);
    this.acknowledge(token);
    // Said at most once a minute, with the rows let go since (the caller counts each).
    const said = this.letGo.add(rows.length, Date.now());
    if (said > 0)
      this.log.error('write-ahead log: rows the disk would not take were let go (past what may be held in memory)', {
        dir: this.dir,
        rows: said,
      });
    return rows.length;
  }

  /** How many whole lines a segment's file holds (0 when it cannot be read). */
  private linesOnDisk(token: string): number {
    try {
      const b = readFileSync(join(this.dir, token));
      let n = 0;
      for (let i = b.indexOf(10); i !== -1; i = b.indexOf(10, i + 1)) n++;
      return n;
    } catch {
      return 0;
    }
  }

  /** Writes a segment's file again whole from its rows; false when the disk will not take it. */
  private rewrite(token: string, rows: readonly T[]): boolean {
    try {
      const lines = Buffer.concat(rows.map((r) => this.line(r)));
      this.inDir(() => replaceFile(join(this.dir, token), lines));
      this.bytes += lines.length - (this.sizes.get(token) ?? 0);
      this.sizes.set(token, lines.length);
      this.writeTaken();
      return true;
    } catch (e) {
      this.writeFailed('a segment could not be written', e as Error);
      return false;
    }
  }

  /** Rows held in memory for segments the disk would not take. */
  get heldInMemory(): number {
    return this.heldRows;
  }

  /**
   * The oldest segment of the backlog, read back from disk (torn lines skipped), or
   * null. One held in memory is written to disk first if the disk takes it now, else
   * given with its rows and no file.
   */
  peek(): Segment<T> | null {
    const name = this.backlog[0];
    if (name === undefined) return null;
    const held = this.held.get(name);
    if (held !== undefined) {
      if (!this.rewrite(name, held.rows)) return { token: name, rows: held.rows as T[], file: null };
      this.unhold(name);
    }
    const path = join(this.dir, name);
    if (!existsSync(path)) {
      // Removed from the disk by someone else: its rows cannot be had; what it counted goes.
      this.backlog.shift();
      this.inherited.delete(name);
      this.bytes -= this.sizes.get(name) ?? 0;
      this.sizes.delete(name);
      this.log.error('write-ahead log: a segment of the backlog is gone from the disk; its rows are not stored', {
        segment: name,
      });
      return this.peek();
    }
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (e) {
      // Never readable again (EACCES, EIO): set aside under another name, so the backlog
      // behind it and new wakes are still stored; nothing is deleted.
      this.setAside(name, e as Error);
      return this.peek();
    }
    const rows: T[] = [];
    let rewrite = !text.endsWith('\n');
    const lines = text.split('\n');
    // Lines that do not decode; those of them a newline ends (whole, not torn by a kill mid-write).
    let bad = 0;
    let wholeBad = 0;
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i] as string;
      if (line === '') continue;
      // Every line is written with its newline: a last one without it was torn by a kill,
      // never decoded (cut at a tab, it could read as a line of an older, shorter form).
      if (i === lines.length - 1 && !text.endsWith('\n')) {
        this.torn++;
        bad++;
        continue;
      }
      try {
        rows.push(this.codec.decode(line));
        if (this.codec.isCurrent && !this.codec.isCurrent(line)) rewrite = true;
      } catch {
        rewrite = true;
        this.torn++;
        bad++;
        if (i < lines.length - 1) wholeBad++;
      }
    }
    if (bad > 0) this.log.warn('write-ahead log: torn or unreadable lines were skipped', { segment: name, lines: bad });
    // Whole lines and not one this version reads: a later version's log (rolled back after
    // a kill), never deleted: set aside, to be renamed back once that version runs again.
    if (rows.length === 0 && wholeBad > 0) {
      this.setAside(name, new Error(`none of its ${wholeBad} lines can be read by this version (a later version's?)`));
      return this.peek();
    }
    // An insert reads the file as it is: it must hold only whole lines of the current form.
    if (rewrite && rows.length > 0) {
      replaceFile(path, Buffer.concat(rows.map((r) => this.line(r))));
    }
    return { token: name, rows, file: path };
  }

  /**
   * A segment that cannot be read leaves the backlog, renamed `<name>.unreadable` (kept
   * for an operator: renamed back, it is inserted at the next start).
   */
  private setAside(name: string, e: Error): void {
    this.moveAside(name, 'unreadable', 'a segment could not be read and was set aside; its wakes are not stored', e);
  }

  /**
   * The backlog's oldest segment, which storage refuses every time (a value it cannot
   * parse), leaves the backlog renamed `<name>.refused`, so the rest are stored (kept
   * for an operator: mended and renamed back, it is inserted at the next start).
   */
  setAsideRefused(token: string, e: Error): void {
    const held = this.held.get(token);
    // Rows the disk would not take are written out now if it takes them (else they are let go).
    if (held !== undefined) this.rewrite(token, held.rows);
    this.unhold(token);
    this.moveAside(
      token,
      'refused',
      'storage refuses a segment every time; it was set aside and its wakes are not stored',
      e,
    );
  }

  private moveAside(name: string, suffix: string, msg: string, e: Error): void {
    const at = this.backlog.indexOf(name);
    if (at !== -1) this.backlog.splice(at, 1);
    this.inherited.delete(name);
    this.bytes -= this.sizes.get(name) ?? 0;
    this.sizes.delete(name);
    this.sealedAt.delete(name);
    const aside = `${name}.${suffix}`;
    try {
      renameSync(join(this.dir, name), join(this.dir, aside));
    } catch {
      // Left under its name: the next start tries it again.
    }
    this.log.error(`write-ahead log: ${msg}`, { segment: name, set_aside_as: aside, err: e });
  }

  /** True for a segment left by an earlier run: its batch's listeners may never have run. */
  fromEarlierRun(token: string): boolean {
    return this.inherited.has(token);
  }

  /** The backlog's oldest segment was inserted: it goes. */
  shift(token: string): void {
    if (this.backlog[0] === token) this.backlog.shift();
    this.inherited.delete(token);
    this.unhold(token);
    this.acknowledge(token);
  }

  private unhold(token: string): void {
    const held = this.held.get(token);
    if (held === undefined) return;
    this.held.delete(token);
    this.heldRows -= held.rows.length;
    this.heldBytes -= held.bytes;
  }

  /**
   * Takes over the batches of the spool of earlier versions (`{token, rows}` JSON
   * files): each becomes a segment of the backlog under its own token.
   */
  adoptLegacySpool(spoolDir: string): number {
    if (!existsSync(spoolDir)) return 0;
    let n = 0;
    for (const f of readdirSync(spoolDir).sort()) {
      if (!f.endsWith('.json')) continue;
      try {
        const { token, rows } = JSON.parse(readFileSync(join(spoolDir, f), 'utf8')) as { token: string; rows: T[] };
        const name = `00000000000000-legacy-${String(n).padStart(6, '0')}-${token.replace(/[^A-Za-z0-9-]/g, '')}${SUFFIX}`;
        const raw = Buffer.concat(rows.map((r) => this.line(r)));
        replaceFile(join(this.dir, name), raw);
        this.backlog.unshift(name);
        this.sizes.set(name, raw.length);
        this.bytes += raw.length;
        rmSync(join(spoolDir, f), { force: true });
        n++;
      } catch (e) {
        this.log.error('could not read a spooled batch of an earlier version', { file: f, err: e as Error });
      }
    }
    this.backlog.sort();
    return n;
  }

  /**
   * At a stop: writes each segment held in memory to disk if the disk takes it now, and
   * lets go of the rest. Returns how many rows were let go (the caller counts them dropped).
   */
  releaseHeld(): number {
    let lost = 0;
    for (const [token, held] of [...this.held]) {
      if (this.rewrite(token, held.rows)) {
        this.unhold(token);
        continue;
      }
      // The file stays: the lines the disk took are read at the next start (a torn last
      // one skipped); only the rows it does not hold are lost.
      this.unhold(token);
      lost += Math.max(0, held.rows.length - this.linesOnDisk(token));
    }
    if (lost > 0)
      this.log.error('write-ahead log: rows held in memory are lost at this stop: the disk would not take them', {
        dir: this.dir,
        rows: lost,
      });
    return lost;
  }

  /** Writes what is pending and stops the timers (segments stay for the next start). */
  close(): void {
    this.writePending();
    for (const t of this.timers) clearInterval(t);
    if (this.syncTimer !== null) clearTimeout(this.syncTimer);
    this.syncTimer = null;
    if (this.fd !== null) {
      closeSync(this.fd);
      this.fd = null;
    }
  }
}
