import { randomBase62 } from '../ids.js';
import type { Logger } from '../log.js';
import type { Sealed, Wal } from './wal.js';

export interface BatcherOptions {
  batchRows: number;
  flushIntervalMs: number;
  maxBufferedRows: number;
  /** An insert that has not answered by then is treated as failed (and spooled). */
  insertTimeoutMs?: number;
  /** How often the spool is retried while storage is down. */
  retryIntervalMs?: number;
  /** Batches written at once while storage answers (1: strictly one at a time). */
  maxInflight?: number;
  /**
   * With a write-ahead log: rows are not kept in memory once the log has them. A
   * batch is its segment's file (the sink reads it), and listeners hear each row
   * as it is pushed. Without it, every row waits in memory until its batch is
   * stored, long enough to be promoted to the old generation of the heap.
   */
  rowsInLog?: boolean;
  /** Rows dropped (buffer full, log full, storage failed), for the metrics. */
  onDrop?: (n: number, reason: string) => void;
  /** Rows stored and how long the insert took, for the metrics. */
  onFlush?: (rows: number, ms: number) => void;
}

export interface BatcherStats {
  buffered: number;
  flushed: number;
  dropped: number;
  spoolBytes: number;
  spoolBatches: number;
  storageUp: boolean;
  lastFlushMs: number;
}

/**
 * Writes one batch. `file` is its sealed segment of the log (exactly its rows), for
 * sinks that can read it, or null. `rows` is empty when the rows were not kept in
 * memory (rowsInLog): the file is the batch.
 */
export type Sink<T> = (rows: readonly T[], token: string, file: string | null) => Promise<void>;

/** Hears every row once (event rules): as it is pushed, or with its batch; `end` after each batch or a run of rows. */
export interface RowListener<T> {
  row(r: T): void;
  end(): void;
}

/** Rows listeners hear of a batch before the event loop is let go (a slice takes well under a millisecond). */
const TELL_SLICE = 256;

/**
 * Storage answered that it will never take this batch (a value it cannot parse): a
 * sink throws it, so the batch is set aside rather than retried forever at the head
 * of the backlog. Told by its `refused` mark, which survives a thread boundary's copy.
 */
export class BatchRefused extends Error {
  readonly refused = true;
}

/** True for an error that says storage refuses the batch itself (see BatchRefused). */
export const isRefused = (e: unknown): boolean =>
  typeof e === 'object' && e !== null && (e as { refused?: unknown }).refused === true;

/** Times in a row storage refuses the backlog's oldest batch before it is set aside. */
const REFUSALS_TO_SET_ASIDE = 3;

const timeout = (ms: number) =>
  new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`insert timed out after ${ms} ms`)), ms).unref());

/**
 * Buffers rows and writes them in batches: when `batchRows` are waiting or every
 * `flushIntervalMs`, whichever comes first. Every row is also appended to the
 * write-ahead log as it is pushed (wal.ts), so a crash loses only what the log
 * had not yet written. A batch is a sealed segment of the log, named by its
 * deduplication token; it leaves the disk once storage acknowledges it. When an
 * insert fails, its segment stays as the backlog and every batch after it joins
 * the backlog until storage answers again; the backlog is then inserted in order,
 * and a segment stored before an ambiguous failure is stored once. Rows are
 * dropped (and counted) only when the memory buffer is full or the log's disk
 * budget is exhausted.
 */
export class Batcher<T> {
  private buffer: T[] = [];
  /** Rows the log holds and memory does not (rowsInLog), not yet in a batch. */
  private held = 0;
  private readonly rowsInLog: boolean;
  private timer: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private readonly runs = new Set<Promise<void>>();
  private replaying = false;
  private inflight = 0;
  /** Rows of batches in flight that are held in memory (all of them, unless rowsInLog). */
  private inflightInMemory = 0;
  private readonly listeners: RowListener<T>[] = [];
  /** The listeners' work on the batches told so far (see tell). */
  private telling: Promise<void> = Promise.resolve();
  private seq = 0;
  private readonly prefix = randomBase62(10);
  readonly stats: BatcherStats = {
    buffered: 0,
    flushed: 0,
    dropped: 0,
    spoolBytes: 0,
    spoolBatches: 0,
    storageUp: true,
    lastFlushMs: 0,
  };
  private readonly onDrop: (n: number, reason: string) => void;
  private readonly onFlush: (rows: number, ms: number) => void;

  /** The backlog's oldest segment could not be read back (said once until it can). */
  private backlogStuck = false;
  /** The last write's failure, when storage refused the batch itself (see BatchRefused). */
  private lastRefusal: Error | null = null;
  /** The backlog's oldest segment and how many times in a row storage refused it. */
  private refusals = { token: '', n: 0 };

  constructor(
    private readonly opts: BatcherOptions,
    private readonly sink: Sink<T>,
    private readonly wal: Wal<T> | null,
    private readonly log: Logger,
  ) {
    this.rowsInLog = wal !== null && opts.rowsInLog === true;
    this.onDrop = opts.onDrop ?? (() => {});
    this.onFlush = opts.onFlush ?? (() => {});
    if (wal) {
      this.stats.spoolBytes = wal.size;
      this.stats.spoolBatches = wal.length;
    }
  }

  /**
   * Starts inserting what the log holds from an earlier run (a crash), while the
   * gateway serves: called once every listener is in place, so they see it too.
   */
  resume(): void {
    if (this.wal && this.wal.length > 0) this.scheduleRetry(0);
  }

  /**
   * Hears every row once: as it is pushed (rowsInLog), else with its batch as it
   * leaves the buffer, in slices off the hot path. Rows a crash left in the log are
   * heard again (so listeners must be idempotent by row).
   */
  onRows(l: RowListener<T>): void {
    this.listeners.push(l);
  }

  /**
   * Rows held in memory: those waiting and in flight, or with rowsInLog only those the
   * log's disk would not take (the rest are on disk, bounded by its budget).
   */
  private inMemory(): number {
    if (!this.rowsInLog) return this.waiting() + this.inflight;
    return this.inflightInMemory + (this.wal?.heldInMemory ?? 0);
  }

  /** Hot path: one serialization for the log and an array push (or a count). False when the row was dropped (and counted). */
  push(row: T): boolean {
    if (this.inMemory() >= this.opts.maxBufferedRows) {
      this.stats.dropped++;
      this.onDrop(1, 'buffer_full');
      return false;
    }
    if (this.wal && !this.wal.append(row)) {
      this.stats.dropped++;
      this.onDrop(1, 'wal_full');
      return false;
    }
    if (this.rowsInLog) {
      this.held++;
      for (const l of this.listeners) this.hear(l, row);
    } else this.buffer.push(row);
    if (this.waiting() >= this.opts.batchRows) {
      this.kick();
    } else if (!this.timer) {
      this.timer = setTimeout(() => this.kick(), this.opts.flushIntervalMs);
      this.timer.unref();
    }
    return true;
  }

  private hear(l: RowListener<T>, row: T): void {
    try {
      l.row(row);
    } catch (e) {
      this.log.error('row listener failed', { err: e as Error });
    }
  }

  /** Rows pushed and not yet in a batch. */
  private waiting(): number {
    return this.buffer.length + this.held;
  }

  get buffered(): number {
    return this.waiting() + this.inflight;
  }

  private kick(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    // More than one batch in flight only while storage answers and nothing is spooled,
    // so a replay in order is never overtaken.
    const degraded = !this.stats.storageUp || (this.wal !== null && this.wal.length > 0);
    const max = degraded ? 1 : (this.opts.maxInflight ?? 1);
    if (this.runs.size >= max) {
      // An insert is slow: a full batch is sealed behind it all the same, so no segment
      // outgrows batch_rows and rows wait on disk, not in memory.
      if (this.wal !== null && this.waiting() >= this.opts.batchRows) this.spill(this.wal);
      return;
    }
    if (this.runs.size > 0 && this.waiting() === 0) return;
    const run: Promise<void> = this.drain()
      .catch((e: Error) => {
        // Not a storage failure (write() handles those): the log's disk. What the log holds stays there.
        this.log.error('capture: a batch could not be written; retrying', { err: e });
        this.scheduleRetry();
      })
      .finally(() => {
        this.runs.delete(run);
        if (this.waiting() >= this.opts.batchRows) this.kick();
        else if (this.waiting() > 0 && !this.timer) {
          this.timer = setTimeout(() => this.kick(), this.opts.flushIntervalMs);
          this.timer.unref();
        }
      });
    this.runs.add(run);
  }

  /**
   * Takes what is waiting as one batch: its rows leave the buffer, its segment of the log
   * is sealed, and the listeners are told. A batch the log could not write whole comes with
   * its rows as the log kept them (read back, and in memory since the failure), detail
   * included, to be inserted from memory (the log says once when its disk begins to refuse).
   */
  private take(): { n: number; rows: readonly T[]; sealed: Sealed<T> | null } {
    const n = this.waiting();
    let rows: readonly T[] = this.buffer;
    this.buffer = [];
    this.held = 0;
    const sealed = this.wal?.seal() ?? null;
    if (n > 0 && this.rowsInLog) this.tellEnd();
    else this.tell(rows);
    if (sealed?.file === null && sealed.rows !== null && (this.rowsInLog || sealed.rows.length >= rows.length))
      rows = sealed.rows;
    return { n, rows, sealed };
  }

  /** Seals what is waiting into the log's backlog, behind the batches in flight (see kick). */
  private spill(wal: Wal<T>): void {
    const { rows, sealed } = this.take();
    if (sealed === null) return;
    const lost = wal.keep(sealed.token, sealed.file === null ? rows : null);
    if (lost > 0) {
      this.stats.dropped += lost;
      this.onDrop(lost, 'wal_full');
    }
    this.stats.buffered = this.waiting();
    this.refreshLogStats();
  }

  private async settle(): Promise<void> {
    while (this.runs.size > 0) await Promise.all([...this.runs]);
  }

  /** Writes everything buffered now (and the log's backlog, if storage answers). */
  async flush(): Promise<void> {
    await this.settle();
    // Each drain writes (or spools, or drops and counts) one batch, so this ends.
    do {
      this.kick();
      await this.settle();
    } while (this.waiting() > 0);
    // The listeners have seen every batch written.
    await this.telling;
  }

  /**
   * Writes one batch: everything buffered now (one sealed segment of the log). Rows
   * that arrive meanwhile wait for the next trigger (batchRows reached, or the
   * interval), so a busy gateway writes few large batches instead of many small ones.
   */
  private async drain(): Promise<void> {
    // Sealed before the backlog is replayed (the replay waits on storage; rows arriving
    // meanwhile are the next batch's), so a batch holds what was waiting when it was kicked.
    const { n, rows, sealed } = this.take();
    this.inflight += n;
    const token = sealed?.token ?? (n > 0 ? `${this.prefix}-${this.seq++}` : '');
    const inMemory = rows.length;
    this.inflightInMemory += inMemory;
    try {
      await this.replayBacklog();
      this.backlogStuck = false;
    } catch (e) {
      // The log's disk refused the backlog's oldest segment (rewriting a torn one, say):
      // tried again later (said once), and the rows of now are still sealed, behind it.
      if (!this.backlogStuck)
        this.log.error('capture: the backlog could not be read back from the log; retrying', { err: e as Error });
      this.backlogStuck = true;
      this.scheduleRetry();
    }
    if (n === 0) {
      this.refreshLogStats();
      return;
    }
    if (this.wal && sealed) {
      // Behind a backlog, a batch waits its turn on disk (or in memory, the disk refusing), so order holds.
      if (this.wal.length > 0 || !(await this.write(rows, n, token, sealed.file))) {
        const lost = this.wal.keep(token, sealed.file === null ? rows : null);
        if (lost > 0) {
          this.stats.dropped += lost;
          this.onDrop(lost, 'wal_full');
        }
      } else this.wal.acknowledge(token);
    } else if (!(await this.write(rows, n, token, null))) {
      this.stats.dropped += n;
      this.onDrop(n, 'storage_failed');
      this.log.error('rows dropped: storage failed and there is no write-ahead log', { count: n });
    }
    this.inflight -= n;
    this.inflightInMemory -= inMemory;
    this.stats.buffered = this.waiting();
    this.refreshLogStats();
  }

  /**
   * Hands a batch to the listeners (event rules), in slices with the event loop let
   * go between them, so a large batch never holds requests up for milliseconds;
   * batches are told one after the other, in order.
   */
  private tell(rows: readonly T[]): void {
    if (this.listeners.length === 0 || rows.length === 0) return;
    this.telling = this.telling.then(() => this.tellSliced(rows));
  }

  private async tellSliced(rows: readonly T[]): Promise<void> {
    for (let i = 0; i < rows.length; i++) {
      if (i > 0 && i % TELL_SLICE === 0) await new Promise<void>((r) => setImmediate(r));
      for (const l of this.listeners) this.hear(l, rows[i] as T);
    }
    this.tellEnd();
  }

  /** Tells the listeners a batch (or a run of rows heard as they were pushed) ended. */
  private tellEnd(): void {
    for (const l of this.listeners) {
      try {
        l.end();
      } catch (e) {
        this.log.error('row listener failed', { err: e as Error });
      }
    }
  }

  private refreshLogStats(): void {
    if (!this.wal) return;
    this.stats.spoolBytes = this.wal.size;
    this.stats.spoolBatches = this.wal.length;
    if (this.wal.length > 0) this.scheduleRetry();
  }

  private async write(rows: readonly T[], n: number, token: string, file: string | null): Promise<boolean> {
    const t0 = performance.now();
    this.lastRefusal = null;
    try {
      await Promise.race([this.sink(rows, token, file), timeout(this.opts.insertTimeoutMs ?? 30_000)]);
      const ms = performance.now() - t0;
      this.stats.flushed += n;
      this.stats.lastFlushMs = ms;
      this.onFlush(n, ms);
      if (!this.stats.storageUp) this.log.info('storage answers again');
      this.stats.storageUp = true;
      return true;
    } catch (e) {
      if (isRefused(e)) this.lastRefusal = e as Error;
      if (this.stats.storageUp)
        this.log.error('storage insert failed; keeping the batch in the log', { err: e as Error });
      this.stats.storageUp = false;
      this.scheduleRetry();
      return false;
    }
  }

  private scheduleRetry(ms = this.opts.retryIntervalMs ?? 1000): void {
    if (this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.kick();
      if (this.waiting() === 0 && this.runs.size === 0 && this.wal && this.wal.length > 0) {
        this.replayBacklog()
          .then(() => this.refreshLogStats())
          .catch((e: Error) => {
            this.log.error('capture: the log backlog could not be read; retrying', { err: e });
            this.scheduleRetry();
          });
      }
    }, ms);
    this.retryTimer.unref();
  }

  /** Inserts the backlog oldest first; stops at the first failure. */
  private async replayBacklog(): Promise<void> {
    if (!this.wal || this.replaying) return;
    this.replaying = true;
    try {
      for (let seg = this.wal.peek(); seg; seg = this.wal.peek()) {
        if (seg.rows.length > 0 && !(await this.write(seg.rows, seg.rows.length, seg.token, seg.file))) {
          if (!this.refusedForGood(seg.token)) return;
          // Storage will never take it: kept on disk for an operator, and the backlog goes on.
          this.wal.setAsideRefused(seg.token, this.lastRefusal as Error);
          this.stats.dropped += seg.rows.length;
          this.onDrop(seg.rows.length, 'storage_refused');
          this.refreshLogStats();
          continue;
        }
        // A batch a crash cut short may never have reached its listeners (event rules):
        // they see it now. Events they raise have ids derived from the rows', so a batch
        // seen twice raises each event once.
        if (this.wal.fromEarlierRun(seg.token)) this.tell(seg.rows);
        this.wal.shift(seg.token);
        this.refreshLogStats();
      }
    } finally {
      this.replaying = false;
    }
  }

  /** The backlog's oldest batch was just refused by storage: true once that has happened REFUSALS_TO_SET_ASIDE times in a row. */
  private refusedForGood(token: string): boolean {
    if (this.lastRefusal === null) {
      this.refusals = { token: '', n: 0 };
      return false;
    }
    this.refusals = { token, n: this.refusals.token === token ? this.refusals.n + 1 : 1 };
    return this.refusals.n >= REFUSALS_TO_SET_ASIDE;
  }

  /** Writes the log's pending lines now, synchronously (a thread about to die keeps what it answered). */
  writeLog(): void {
    this.wal?.writePending();
  }

  /** Flushes everything, stops the timers and closes the log (what storage did not take stays in it). */
  async stop(): Promise<void> {
    await this.flush();
    // What the log's disk will not give back now stays in the log, for the next start.
    await this.replayBacklog().catch((e: Error) =>
      this.log.error('capture: the backlog could not be read back at the stop; it stays in the log', { err: e }),
    );
    await this.telling;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    // Rows the disk would not take, held in memory, end with the process unless it takes them now.
    const lost = this.wal?.releaseHeld() ?? 0;
    if (lost > 0) {
      this.stats.dropped += lost;
      this.onDrop(lost, 'wal_full');
    }
    this.wal?.close();
  }
}
