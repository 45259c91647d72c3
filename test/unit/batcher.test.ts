import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Batcher } from '../../src/capture/batcher.js';
import { Wal } from '../../src/capture/wal.js';
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
    // A new process finds an empty log: every segment was acknowledged.
    expect(new Wal<number>(dir, 1_000_000, WAL, silentLogger).length).toBe(0);
  });

  it('drops and counts only past the log disk budget', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-spool-'));
    const drops: [number, string][] = [];
    const b = new Batcher<number>(
      { batchRows: 100, flushIntervalMs: 10, maxBufferedRows: 10_000, retryIntervalMs: 60_000 },
      async () => {
        throw new Error('down');
      },
      new Wal<number>(dir, 2_000, WAL, silentLogger),
      silentLogger,
    );
    b.onDrop = (n, reason) => drops.push([n, reason]);
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
});
