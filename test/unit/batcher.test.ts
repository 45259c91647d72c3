import { closeSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Batcher, BatchRefused } from '../../src/capture/batcher.js';
import { Wal, type WalCodec } from '../../src/capture/wal.js';
import { silentLogger } from '../../src/log.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const WAL = { syncIntervalMs: 10, fsyncIntervalMs: 1000 };

describe('batcher', () => {
  it('regression: under steady load it writes few large batches, not one per insert round trip', async () => {
    const sizes: number[] = [];
    const b = new Batcher<number>(
      { batchRows: 5000, flushIntervalMs: 200, maxBufferedRows: 100_000 },
      async (rows) => {
        sizes.push(rows.length);
        await sleep(30);
      },
      null,
      silentLogger,
    );
    const until = Date.now() + 700;
    let i = 0;
    while (Date.now() < until) {
      for (let k = 0; k < 20; k++) b.push(i++);
      await sleep(1);
    }
    await b.stop();
    expect(sizes.reduce((a, n) => a + n, 0)).toBe(i);
    // One batch per 200 ms interval (plus the final flush), whatever the insert latency.
    expect(sizes.length).toBeLessThanOrEqual(6);
  });

  it('flushes at batch_rows without waiting for the interval', async () => {
    const sizes: number[] = [];
    const b = new Batcher<number>(
      { batchRows: 100, flushIntervalMs: 60_000, maxBufferedRows: 1000 },
      async (rows) => {
        sizes.push(rows.length);
      },
      null,
      silentLogger,
    );
    for (let i = 0; i < 100; i++) b.push(i);
    await sleep(20);
    expect(sizes).toEqual([100]);
    await b.stop();
  });

  it('spools batches while storage fails and replays them in order with their tokens once it answers', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-spool-'));
    let up = false;
    const written: { token: string; rows: number[] }[] = [];
    const b = new Batcher<number>(
      { batchRows: 10, flushIntervalMs: 10, maxBufferedRows: 1000, retryIntervalMs: 20 },
      async (rows, token) => {
        if (!up) throw new Error('storage down');
        written.push({ token, rows: [...rows] });
      },
      new Wal<number>(dir, 1_000_000, WAL, silentLogger),
      silentLogger,
    );
    for (let round = 0; round < 3; round++) {
      for (let i = round * 10; i < round * 10 + 10; i++) b.push(i);
      await b.flush();
    }
    expect(written).toEqual([]);
    expect(b.stats.storageUp).toBe(false);
    expect(b.stats.spoolBatches).toBe(3);
    for (let i = 30; i < 40; i++) b.push(i);
    await b.flush();
    expect(b.stats.spoolBatches).toBe(4);
    up = true;
    await sleep(50);
    await b.flush();
    expect(written.flatMap((w) => w.rows)).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(new Set(written.map((w) => w.token)).size).toBe(4);
    expect(b.stats.spoolBatches).toBe(0);
    expect(b.stats.dropped).toBe(0);
    await b.stop();
    // A new process finds an empty log: every segment was acknowledged (and unlinked off
    // the event loop: waited for, bounded, as a busy thread pool may take a moment).
    const segments = () => readdirSync(dir).filter((f) => f.endsWith('.wal')).length;
    for (let i = 0; i < 200 && segments() > 0; i++) await sleep(10);
    expect(new Wal<number>(dir, 1_000_000, WAL, silentLogger).length).toBe(0);
  });

  it('drops and counts only past the log disk budget', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-spool-'));
    const drops: [number, string][] = [];
    const b = new Batcher<number>(
      {
        batchRows: 100,
        flushIntervalMs: 10,
        maxBufferedRows: 10_000,
        retryIntervalMs: 60_000,
        onDrop: (n, reason) => drops.push([n, reason]),
      },
      async () => {
        throw new Error('down');
      },
      new Wal<number>(dir, 2_000, WAL, silentLogger),
      silentLogger,
    );
    for (let i = 0; i < 1000; i++) b.push(i);
    await b.flush();
    // Rows are refused as they are appended, once the log holds its budget.
    expect(b.stats.dropped).toBeGreaterThan(0);
    expect(b.stats.dropped).toBeLessThan(1000);
    expect(b.stats.spoolBytes).toBeLessThanOrEqual(2_000);
    expect(drops.every(([, r]) => r === 'wal_full')).toBe(true);
    expect(drops.reduce((a, [n]) => a + n, 0)).toBe(b.stats.dropped);
    await b.stop();
  });

  it('counts rows refused when the memory buffer is full', async () => {
    const b = new Batcher<number>(
      { batchRows: 1_000_000, flushIntervalMs: 60_000, maxBufferedRows: 10 },
      async () => {},
      null,
      silentLogger,
    );
    // push says which rows it refused, so their owner can let go of what they hold.
    const accepted = Array.from({ length: 15 }, (_, i) => b.push(i));
    expect(accepted.filter(Boolean)).toHaveLength(10);
    expect(accepted.slice(10)).toEqual([false, false, false, false, false]);
    expect(b.stats.dropped).toBe(5);
    await b.stop();
  });

  it('writes up to max_inflight_batches at once while storage answers, and one at a time while it fails', async () => {
    let active = 0;
    let peak = 0;
    let fail = false;
    const b = new Batcher<number>(
      { batchRows: 10, flushIntervalMs: 1000, maxBufferedRows: 100_000, maxInflight: 2, retryIntervalMs: 20 },
      async () => {
        active++;
        peak = Math.max(peak, active);
        await sleep(30);
        active--;
        if (fail) throw new Error('down');
      },
      new Wal<number>(mkdtempSync(join(tmpdir(), 'wg-spool-')), 1_000_000, WAL, silentLogger),
      silentLogger,
    );
    for (let i = 0; i < 10; i++) b.push(i);
    await sleep(5);
    for (let i = 0; i < 10; i++) b.push(i);
    await b.flush();
    expect(peak).toBe(2);
    fail = true;
    peak = 0;
    for (let i = 0; i < 10; i++) b.push(i);
    await b.flush();
    expect(b.stats.storageUp).toBe(false);
    for (let i = 0; i < 10; i++) b.push(i);
    await sleep(5);
    for (let i = 0; i < 10; i++) b.push(i);
    await b.flush();
    expect(peak).toBe(1);
    fail = false;
    await sleep(100);
    await b.flush();
    expect(b.stats.spoolBatches).toBe(0);
    expect(b.stats.flushed).toBe(50);
    await b.stop();
  });

  describe('rows kept in the log only (rowsInLog)', () => {
    /** Numbers as lines. */
    const codec: WalCodec<number> = { encode: String, decode: Number };
    /** Makes every later write of the log's active segment fail (a bad descriptor), as a failing disk would. */
    const breakWrites = (wal: Wal<number>) => {
      const w = wal as unknown as { fd: number | null };
      if (w.fd !== null) closeSync(w.fd);
      w.fd = 2_000_000;
    };
    const setup = (fail: () => boolean) => {
      const dir = mkdtempSync(join(tmpdir(), 'wg-rows-'));
      const wal = new Wal<number>(dir, 1_000_000, WAL, silentLogger, codec);
      const batches: { rows: number[]; file: string | null; fromFile: number[] }[] = [];
      const heard: number[] = [];
      let ends = 0;
      const b = new Batcher<number>(
        { batchRows: 1000, flushIntervalMs: 60_000, maxBufferedRows: 10_000, retryIntervalMs: 20, rowsInLog: true },
        async (rows, _token, file) => {
          if (fail()) throw new Error('storage down');
          const fromFile = file ? readFileSync(file, 'utf8').trim().split('\n').map(Number) : [];
          batches.push({ rows: [...rows], file, fromFile });
        },
        wal,
        silentLogger,
      );
      b.onRows({ row: (n) => heard.push(n), end: () => ends++ });
      return { dir, wal, b, batches, heard, ends: () => ends };
    };

    it('keeps no row in memory: a batch is its segment file, and listeners hear each row as it is pushed', async () => {
      const { b, batches, heard, ends } = setup(() => false);
      for (const n of [2, 4, 6]) b.push(n);
      // Heard at once, before any batch.
      expect(heard).toEqual([2, 4, 6]);
      expect(ends()).toBe(0);
      expect(b.buffered).toBe(3);
      await b.flush();
      expect(batches).toEqual([expect.objectContaining({ rows: [], fromFile: [2, 4, 6] })]);
      expect(ends()).toBe(1);
      for (const n of [8, 9]) b.push(n);
      await b.flush();
      expect(batches[1]).toMatchObject({ rows: [], fromFile: [8, 9] });
      expect(b.stats.flushed).toBe(5);
      expect(b.buffered).toBe(0);
      await b.stop();
    });

    it('regression: a batch whose log write failed is stored whole, from the lines written and those kept since', async () => {
      const { wal, b, batches } = setup(() => false);
      for (let n = 0; n < 5; n++) b.push(n);
      // Written to the segment's file (the group commit's interval is 10 ms).
      await sleep(30);
      breakWrites(wal);
      for (let n = 5; n < 10; n++) b.push(n);
      await sleep(30);
      for (let n = 10; n < 12; n++) b.push(n);
      await b.flush();
      expect(batches).toHaveLength(1);
      expect(batches[0]).toMatchObject({ file: null });
      expect(batches[0]?.rows).toEqual(Array.from({ length: 12 }, (_, i) => i));
      // The next batch has a file of its own again.
      b.push(12);
      await b.flush();
      expect(batches[1]).toMatchObject({ rows: [], fromFile: [12] });
      expect(b.stats.dropped).toBe(0);
      await b.stop();
    });

    it('regression: when storage fails too, that segment is written again whole and stored later, nothing lost', async () => {
      let down = true;
      const { dir, wal, b, batches } = setup(() => down);
      for (let n = 0; n < 3; n++) b.push(n);
      await sleep(30);
      breakWrites(wal);
      for (let n = 3; n < 6; n++) b.push(n);
      await b.flush();
      expect(batches).toEqual([]);
      expect(b.stats.spoolBatches).toBe(1);
      // On disk whole: a restart would find every row.
      const [seg] = readdirSync(dir).filter((f) => f.endsWith('.wal'));
      expect(readFileSync(join(dir, seg as string), 'utf8')).toBe('0\n1\n2\n3\n4\n5\n');
      down = false;
      await sleep(60);
      await b.flush();
      expect(batches.flatMap((x) => x.rows)).toEqual([0, 1, 2, 3, 4, 5]);
      expect(b.stats.spoolBatches).toBe(0);
      await b.stop();
    });

    /** A batcher whose first insert hangs until `release` is called, then fails or succeeds as told. */
    const stuck = (firstFails: boolean) => {
      const dir = mkdtempSync(join(tmpdir(), 'wg-stuck-'));
      const wal = new Wal<number>(dir, 10_000_000, WAL, silentLogger, codec);
      const stored: number[][] = [];
      let release = () => {};
      const gate = new Promise<void>((r) => {
        release = r;
      });
      let calls = 0;
      const b = new Batcher<number>(
        {
          batchRows: 100,
          flushIntervalMs: 60_000,
          maxBufferedRows: 300,
          maxInflight: 1,
          retryIntervalMs: 20,
          insertTimeoutMs: 60_000,
          rowsInLog: true,
        },
        async (_rows, _token, file) => {
          if (calls++ === 0) {
            await gate;
            if (firstFails) throw new Error('storage timed out');
          }
          stored.push(
            readFileSync(file as string, 'utf8')
              .trim()
              .split('\n')
              .map(Number),
          );
        },
        wal,
        silentLogger,
      );
      const segments = () => readdirSync(dir).filter((f) => f.endsWith('.wal'));
      const lines = () => segments().map((f) => readFileSync(join(dir, f), 'utf8').trim().split('\n').length);
      return { b, stored, release: () => release(), segments, lines };
    };

    it('regression: while an insert is stuck, rows the log holds on disk are not dropped as buffer_full, and segments stay batch-sized', async () => {
      const { b, stored, release, lines } = stuck(false);
      const drops: string[] = [];
      (b as unknown as { onDrop: (n: number, r: string) => void }).onDrop = (_n, r) => drops.push(r);
      for (let n = 0; n < 1100; n++) b.push(n);
      await sleep(40);
      // Ten times max_buffered_rows would have been dropped before; the log holds them all.
      expect(b.stats.dropped).toBe(0);
      expect(drops).toEqual([]);
      // Each batch sealed as it filled, behind the one in flight.
      const sizes = lines();
      expect(sizes.length).toBe(11);
      expect(Math.max(...sizes)).toBe(100);
      release();
      await b.flush();
      expect(stored.flat()).toEqual(Array.from({ length: 1100 }, (_, i) => i));
      expect(Math.max(...stored.map((r) => r.length))).toBe(100);
      await b.stop();
    });

    it('regression: a stuck insert that then fails is stored before the batches sealed behind it', async () => {
      const { b, stored, release, segments } = stuck(true);
      for (let n = 0; n < 350; n++) b.push(n);
      await sleep(40);
      release();
      await sleep(100);
      await b.flush();
      expect(stored.flat()).toEqual(Array.from({ length: 350 }, (_, i) => i));
      expect(b.stats.dropped).toBe(0);
      expect(segments()).toEqual([]);
      await b.stop();
    });

    it('sets a batch storage refuses three times in a row aside, and never one it fails on otherwise', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'wg-refused-'));
      const wal = new Wal<number>(dir, 1_000_000, WAL, silentLogger, codec);
      const stored: number[] = [];
      // Row 1's batch is refused (a value storage cannot parse) until told otherwise; row 2's fails as a network does.
      let refuse = true;
      let downFor = 0;
      const reasons: string[] = [];
      const b = new Batcher<number>(
        {
          batchRows: 1,
          flushIntervalMs: 60_000,
          maxBufferedRows: 100,
          retryIntervalMs: 60_000,
          rowsInLog: true,
          onDrop: (_n, r) => reasons.push(r),
        },
        async (_rows, _token, file) => {
          const rows = readFileSync(file as string, 'utf8')
            .trim()
            .split('\n')
            .map(Number);
          if (rows[0] === 1 && refuse) throw new BatchRefused('Cannot parse input');
          if (rows[0] === 2 && downFor-- > 0) throw new Error('socket hang up');
          stored.push(...rows);
        },
        wal,
        silentLogger,
      );
      // Refused three times (the insert the push began, then a replay per flush: two in the
      // backlog's replay, which counts), then taken: nothing set aside.
      b.push(1);
      for (let i = 0; i < 2; i++) await b.flush();
      expect(stored).toEqual([]);
      refuse = false;
      await b.flush();
      expect(stored).toEqual([1]);
      // Failing many times, not as a refusal: kept until it is taken.
      downFor = 6;
      b.push(2);
      for (let i = 0; i < 8; i++) await b.flush();
      expect(stored).toEqual([1, 2]);
      expect(reasons).toEqual([]);
      // Refused every time: set aside after the third, and the batch behind it stored.
      refuse = true;
      b.push(1);
      b.push(3);
      for (let i = 0; i < 6 && !stored.includes(3); i++) await b.flush();
      expect(stored).toEqual([1, 2, 3]);
      expect(reasons).toEqual(['storage_refused']);
      expect(readdirSync(dir).filter((f) => f.endsWith('.refused'))).toHaveLength(1);
      expect(b.stats.spoolBatches).toBe(0);
      await b.stop();
    });
  });
});
