// The debt sketch's cells restored from the buckets file: far in the future, past any date, a clock stepped back (2026-11-28).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import type { Logger } from '../../src/log.js';
import { silentLogger } from '../../src/log.js';
import { RateLimiter } from '../../src/ratelimit/limiter.js';
import { BUCKETS_FILE, encodeBuckets, restoredBuckets } from '../../src/ratelimit/persist.js';
import { allocateBuckets, SharedBuckets } from '../../src/ratelimit/shared-buckets.js';
import { keyRecord } from '../helpers/keys.js';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const HOUR = 3_600_000;
const YEAR = 365 * 86_400_000;
// The file as persist.ts writes it: a header of 28 bytes (its counts of buckets and of
// debt cells at 16 and 20), buckets of 56 bytes, then debt cells of 12 (index, instant).
const HEAD = 28;
const ENTRY = 56;
const CELL = 12;
const SLOTS = 16;
const CELLS = 4096;
// A fixed hash seed: which buckets share a sketch cell is the same every run.
const SEED: [number, number] = [0x1234567, 0x7654321];
// Addresses: a token an hour, a million at most: never refused, and their buckets outlast the key's.
const values = (dir: string) => ({
  storage: { data_dir: dir },
  ratelimit: { max_buckets: SLOTS, sketch_cells: CELLS },
  rate_limits: { default: { limit: 1, burst: 1_000_000, window: 'hour' } },
});
// One token a second, two at most: drained, its bucket is full again two seconds later.
const paced = keyRecord('sketch_restore', 'production', { limit: 60, burst: 2, window: 'minute' });

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'wakegate-sketch-restore-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const config = () => loadConfig({ values: values(dir), env: {} });
const ask = (l: RateLimiter, now: number) => l.check(paced, '1.1.1.1', null, now).allowed;
let round = 0;
/** New addresses' buckets fill the table: the key's bucket is evicted into the debt sketch. */
function evictKey(l: RateLimiter, now: number): void {
  round++;
  for (let i = 0; i < 2 * SLOTS; i++) expect(l.check(null, `10.${round}.0.${i}`, null, now).allowed).toBe(true);
}

/**
 * The file a gateway writes at T0 + 500 ms: the key drained at T0 (its debt, full again at
 * T0 + 2 s, in the sketch), the addresses' buckets live. Returns the file's bytes and where
 * the key's debt cell is.
 */
function saved(): { bytes: Buffer; cellAt: number } {
  const l = new RateLimiter(config(), allocateBuckets(SLOTS, CELLS, SEED));
  expect(ask(l, T0)).toBe(true);
  expect(ask(l, T0)).toBe(true);
  expect(ask(l, T0)).toBe(false);
  evictKey(l, T0 + 500);
  const bytes = encodeBuckets(l.layout, T0 + 500);
  const n = bytes.readUInt32LE(16);
  const m = bytes.readUInt32LE(20);
  let cellAt = -1;
  for (let k = 0; k < m; k++) {
    const at = HEAD + n * ENTRY + k * CELL;
    if (bytes.readDoubleLE(at + 4) === T0 + 2_000) cellAt = at;
  }
  expect(cellAt).toBeGreaterThan(0);
  return { bytes, cellAt };
}

/** A logger keeping its warnings. */
function warnings(): { log: Logger; said: string[] } {
  const said: string[] = [];
  return { log: { ...silentLogger, warn: (m) => said.push(m) }, said };
}

/** The limiter a start at `now` restores from `bytes` (written as the file), and what it said. */
function restarted(bytes: Buffer, now: number): { l: RateLimiter; said: string[] } {
  writeFileSync(join(dir, BUCKETS_FILE), bytes);
  const cfg = config();
  const { log, said } = warnings();
  const layout = restoredBuckets(cfg, now, log);
  expect(layout).toBeDefined();
  return { l: new RateLimiter(cfg, layout), said };
}

/** The key's burst at `now`, claimed from the sketch (its bucket evicted first). */
function burstAfterEviction(l: RateLimiter, now: number): number {
  evictKey(l, now);
  let ok = 0;
  while (ok < 10 && ask(l, now)) ok++;
  return ok;
}

describe('a debt cell restored from the buckets file', () => {
  it('as saved: the key owes what it owed, and has its burst once that is paid', () => {
    const { bytes } = saved();
    const { l, said } = restarted(bytes, T0 + 600);
    expect(ask(l, T0 + 600)).toBe(false);
    expect(burstAfterEviction(l, T0 + 10_000)).toBe(2);
    expect(said).toEqual([]);
  });

  it('far in the future (a damaged file): owes no later than the file latest debt, not until then', () => {
    const { bytes, cellAt } = saved();
    bytes.writeDoubleLE(T0 + 100 * YEAR, cellAt + 4);
    const { l } = restarted(bytes, T0 + 600);
    // The file's latest debt is an evicted address's, an hour (a token an hour): the cell
    // owes no later (a cell names no policy, so no key's own from-empty can be told). Claimed
    // from the sketch after that the key starts full, every time; before the fix it started
    // empty every time for a hundred years.
    expect(burstAfterEviction(l, T0 + 500 + HOUR + 1_000)).toBe(2);
    expect(burstAfterEviction(l, T0 + 2 * HOUR)).toBe(2);
  });

  it('past any date (1e300): no debt, and the restore says so once', () => {
    const { bytes, cellAt } = saved();
    bytes.writeDoubleLE(1e300, cellAt + 4);
    const { l, said } = restarted(bytes, T0 + 600);
    expect(burstAfterEviction(l, T0 + 10_000)).toBe(2);
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(/out of range/);
  });

  it('far in the future: said once', () => {
    const { bytes, cellAt } = saved();
    bytes.writeDoubleLE(T0 + 100 * YEAR, cellAt + 4);
    expect(restarted(bytes, T0 + 600).said).toHaveLength(1);
  });

  it('a clock stepped back an hour since the save, the file holding no bucket: the debt is as long as it was', () => {
    const { bytes, cellAt } = saved();
    // The same file without its buckets (each full again by the save: a file of debts only).
    const n = bytes.readUInt32LE(16);
    const head = Buffer.from(bytes.subarray(0, HEAD));
    head.writeUInt32LE(0, 16);
    const debtsOnly = Buffer.concat([head, bytes.subarray(HEAD + n * ENTRY)]);
    const back = T0 - HOUR;
    const { l, said } = restarted(debtsOnly, back + 100);
    // The debt ended 1.5 s after the save: 1.5 s after the restart's clock, not an hour and 1.5 s.
    const t = new SharedBuckets(l.layout);
    const keyCell = bytes.readUInt32LE(cellAt);
    expect(t.sketch[keyCell] as number).toBeGreaterThan(0);
    expect((t.sketch[keyCell] as number) - t.debtShiftAt(back + 100)).toBeLessThanOrEqual(back + 100 + 1_500);
    expect(burstAfterEviction(l, back + 10_000)).toBe(2);
    expect(said).toEqual([]);
  });

  it('a file without the clock records (an older gateway) still loads, its debts as they were', () => {
    const { bytes, cellAt } = saved();
    // Only the key's debt cell, as an older gateway wrote the cells.
    const n = bytes.readUInt32LE(16);
    const head = Buffer.from(bytes.subarray(0, HEAD));
    head.writeUInt32LE(1, 20);
    head.writeUInt32LE(0, 24);
    const old = Buffer.concat([head, bytes.subarray(HEAD, HEAD + n * ENTRY), bytes.subarray(cellAt, cellAt + CELL)]);
    const { l, said } = restarted(old, T0 + 600);
    expect(said).toEqual([]);
    expect(ask(l, T0 + 600)).toBe(false);
    expect(burstAfterEviction(l, T0 + 10_000)).toBe(2);
  });

  it('the file of an idle table is the same bytes at every save (the saver writes nothing)', () => {
    const l = new RateLimiter(config(), allocateBuckets(SLOTS, CELLS, SEED));
    ask(l, T0);
    ask(l, T0);
    evictKey(l, T0 + 500);
    expect(encodeBuckets(l.layout, T0 + 700).equals(encodeBuckets(l.layout, T0 + 1_200))).toBe(true);
  });
});
