import { randomBase62 } from '../ids.js';
import type { Logger } from '../log.js';
import type { Spool } from './spool.js';

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
}

export interface BatcherStats {
  buffered: number;
  flushed: number;
  dropped: number;
  spooled: number;
  spoolBytes: number;
  spoolBatches: number;
  storageUp: boolean;
  lastFlushMs: number;
}

export type Sink<T> = (rows: readonly T[], token: string) => Promise<void>;
export type BatchListener<T> = (rows: readonly T[]) => void;

const timeout = (ms: number) =>
  new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`insert timed out after ${ms} ms`)), ms).unref());

/**
 * Buffers rows and writes them in batches: when `batchRows` are waiting or every
 * `flushIntervalMs`, whichever comes first. One insert at a time, so order holds.
 * When an insert fails, the batch goes to the spool and everything after it
 * follows it there until storage answers again; the spool is then replayed in
 * order. Each batch carries a deduplication token, so a replay after an
 * ambiguous failure stores it once. Rows are dropped (and counted) only when the
 * memory buffer is full or the spool's disk budget is exhausted.
 */
export class Batcher<T> {
  private buffer: T[] = [];
  private timer: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private readonly runs = new Set<Promise<void>>();
  private replaying = false;
  private inflight = 0;
  private readonly listeners: BatchListener<T>[] = [];
  private seq = 0;
  private readonly prefix = randomBase62(10);
  readonly stats: BatcherStats = {
    buffered: 0,
    flushed: 0,
    dropped: 0,
    spooled: 0,
    spoolBytes: 0,
    spoolBatches: 0,
    storageUp: true,
    lastFlushMs: 0,
  };
  onDrop: (n: number, reason: string) => void = () => {};
  onFlush: (rows: number, ms: number) => void = () => {};

  constructor(
    private readonly opts: BatcherOptions,
    private readonly sink: Sink<T>,
    private readonly spool: Spool<T> | null,
    private readonly log: Logger,
  ) {
    if (spool) {
      this.stats.spoolBytes = spool.size;
      this.stats.spoolBatches = spool.length;
    }
  }

  /** Called with each batch as it leaves the buffer (event rules run here, off the hot path). */
  onBatch(l: BatchListener<T>): void {
    this.listeners.push(l);
  }

  /** Hot path: one array push. */
  push(row: T): void {
    if (this.buffer.length + this.inflight >= this.opts.maxBufferedRows) {
      this.stats.dropped++;
      this.onDrop(1, 'buffer_full');
      return;
    }
    this.buffer.push(row);
    if (this.buffer.length >= this.opts.batchRows) {
      this.kick();
    } else if (!this.timer) {
      this.timer = setTimeout(() => this.kick(), this.opts.flushIntervalMs);
      this.timer.unref();
    }
  }

  get buffered(): number {
    return this.buffer.length + this.inflight;
  }

  private kick(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    // More than one batch in flight only while storage answers and nothing is spooled,
    // so a replay in order is never overtaken.
    const degraded = !this.stats.storageUp || (this.spool !== null && this.spool.length > 0);
    const max = degraded ? 1 : (this.opts.maxInflight ?? 1);
    if (this.runs.size >= max || (this.runs.size > 0 && this.buffer.length === 0)) return;
    const run: Promise<void> = this.drain().finally(() => {
      this.runs.delete(run);
      if (this.buffer.length >= this.opts.batchRows) this.kick();
      else if (this.buffer.length > 0 && !this.timer) {
        this.timer = setTimeout(() => this.kick(), this.opts.flushIntervalMs);
        this.timer.unref();
      }
    });
    this.runs.add(run);
  }

  private async settle(): Promise<void> {
    while (this.runs.size > 0) await Promise.all([...this.runs]);
  }

  /** Writes everything buffered now (and whatever the spool holds, if storage answers). */
  async flush(): Promise<void> {
    await this.settle();
    // Each drain writes (or spools, or drops and counts) one batch, so this ends.
    do {
      this.kick();
      await this.settle();
    } while (this.buffer.length > 0);
  }

  /**
   * Writes one batch: what is buffered now, up to 4 x batchRows. Rows that arrive
   * meanwhile wait for the next trigger (batchRows reached, or the interval), so a
   * busy gateway writes few large batches instead of many small ones.
   */
  private async drain(): Promise<void> {
    await this.replaySpool();
    if (this.buffer.length > 0) {
      const rows =
        this.buffer.length > this.opts.batchRows * 4 ? this.buffer.splice(0, this.opts.batchRows * 4) : this.buffer;
      if (rows === this.buffer) this.buffer = [];
      this.inflight += rows.length;
      const token = `${this.prefix}-${this.seq++}`;
      for (const l of this.listeners) {
        try {
          l(rows);
        } catch (e) {
          this.log.error('batch listener failed', { err: e as Error });
        }
      }
      if (this.spool && this.spool.length > 0) {
        this.toSpool(rows, token);
      } else if (!(await this.write(rows, token))) {
        this.toSpool(rows, token);
      }
      this.inflight -= rows.length;
      this.stats.buffered = this.buffer.length;
    }
  }

  private async write(rows: readonly T[], token: string): Promise<boolean> {
    const t0 = performance.now();
    try {
      await Promise.race([this.sink(rows, token), timeout(this.opts.insertTimeoutMs ?? 30_000)]);
      const ms = performance.now() - t0;
      this.stats.flushed += rows.length;
      this.stats.lastFlushMs = ms;
      this.onFlush(rows.length, ms);
      if (!this.stats.storageUp) this.log.info('storage answers again');
      this.stats.storageUp = true;
      return true;
    } catch (e) {
      if (this.stats.storageUp) this.log.error('storage insert failed; spooling', { err: e as Error });
      this.stats.storageUp = false;
      this.scheduleRetry();
      return false;
    }
  }

  private toSpool(rows: readonly T[], token: string): void {
    if (!this.spool) {
      this.stats.dropped += rows.length;
      this.onDrop(rows.length, 'storage_failed');
      this.log.error('wakes dropped: storage failed and no spool is configured', { count: rows.length });
      return;
    }
    if (this.spool.append(token, rows)) {
      this.stats.spooled += rows.length;
    } else {
      this.stats.dropped += rows.length;
      this.onDrop(rows.length, 'spool_full');
      this.log.error('wakes dropped: spool disk budget exhausted', { count: rows.length });
    }
    this.stats.spoolBytes = this.spool.size;
    this.stats.spoolBatches = this.spool.length;
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.kick();
    }, this.opts.retryIntervalMs ?? 1000);
    this.retryTimer.unref();
  }

  /** Replays spooled batches oldest first; stops at the first failure. */
  private async replaySpool(): Promise<void> {
    if (!this.spool || this.replaying) return;
    this.replaying = true;
    try {
      for (let entry = this.spool.peek(); entry; entry = this.spool.peek()) {
        if (!(await this.write(entry.rows, entry.token))) return;
        this.spool.remove(entry);
        this.stats.spoolBytes = this.spool.size;
        this.stats.spoolBatches = this.spool.length;
      }
    } finally {
      this.replaying = false;
    }
  }

  /** Flushes everything and stops the timers. */
  async stop(): Promise<void> {
    await this.flush();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }
}
