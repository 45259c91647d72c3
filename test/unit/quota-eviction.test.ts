import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { loadConfig } from '../../src/config/index.js';
import { type QuotaWarning, RateLimiter } from '../../src/ratelimit/limiter.js';
import { decodeBuckets, encodeBuckets } from '../../src/ratelimit/persist.js';
import {
  allocateBuckets,
  SharedBuckets,
  type SharedBucketsLayout,
  seedOf,
} from '../../src/ratelimit/shared-buckets.js';
import { keyRecord } from '../helpers/keys.js';

// A minute's start: the key's quota window is [T0, T0 + 60 s).
const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
// A seed under which the two keys' evictions do share counts (early > 0 below); under some seeds none does.
const SEED0 = 1;
const SLOTS = 16;
const CELLS = 4096;
// Unkeyed requests: a token a minute, so an address's bucket is full again a minute after
// its request, after the key's quota window (a minute from T0): a full table evicts the
// key's bucket first. Bursts so large that no debt shared through a sketch cell refuses
// anything here: only the quota is counted.
const values = {
  ratelimit: { max_buckets: SLOTS, sketch_cells: CELLS },
  rate_limits: { default: { limit: 60, burst: 1_000_000, window: 'hour' } },
};
// 100 a minute.
const k = keyRecord('quota_evicted', 'production', { limit: 100, burst: 1_000_000, window: 'minute' });

function setup(layout?: SharedBucketsLayout) {
  const warnings: QuotaWarning[] = [];
  const l = new RateLimiter(loadConfig({ values }), layout, (w) => warnings.push(w));
  return { l, warnings, heard: () => warnings.map((w) => [w.threshold, w.used]) };
}

function send(l: RateLimiter, key: KeyRecord, n: number, now: number): void {
  for (let i = 0; i < n; i++) expect(l.check(key, '1.1.1.1', null, now).allowed).toBe(true);
}

/** Slots holding a bucket with a quota window (only keys' buckets have one). */
function quotaSlots(layout: SharedBucketsLayout): number {
  const i32 = new Int32Array(layout.buffer, 0, (layout.slots + 1) * 16);
  const f64 = new Float64Array(layout.buffer, 0, (layout.slots + 1) * 8);
  let n = 0;
  for (let s = 0; s < layout.slots; s++) if (i32[(s + 1) * 16 + 2] !== 0 && (f64[(s + 1) * 8 + 7] as number) > 0) n++;
  return n;
}

/** Each call's addresses are new. */
let round = 0;
/** Fills the table with new addresses' buckets (which outlast the keys'): every key's bucket is evicted. */
function evictKey(l: RateLimiter, now: number): void {
  round++;
  for (let i = 0; i < 2 * SLOTS; i++) expect(l.check(null, `10.${round}.0.${i}`, null, now).allowed).toBe(true);
  expect(quotaSlots(l.layout)).toBe(0);
}

describe('a key evicted mid-window keeps its quota count', () => {
  it('counted to 70%, evicted, then on: 80% warned once, at 80; 95% at 95; evicted again past 80%, not warned again', () => {
    const { l, heard } = setup();
    send(l, k, 70, T0);
    expect(quotaSlots(l.layout)).toBe(1);
    evictKey(l, T0 + 1_000);
    send(l, k, 9, T0 + 2_000);
    expect(heard()).toEqual([]);
    send(l, k, 1, T0 + 2_000);
    expect(heard()).toEqual([[0.8, 80]]);
    send(l, k, 5, T0 + 3_000);
    evictKey(l, T0 + 4_000);
    send(l, k, 9, T0 + 5_000);
    expect(heard()).toEqual([[0.8, 80]]);
    send(l, k, 1, T0 + 5_000);
    expect(heard()).toEqual([
      [0.8, 80],
      [0.95, 95],
    ]);
    evictKey(l, T0 + 6_000);
    send(l, k, 5, T0 + 7_000);
    expect(heard()).toHaveLength(2);
    // Evicted at 100 (its cells say so for this window): the next window counts from
    // nothing, its cells of the window before ignored.
    evictKey(l, T0 + 8_000);
    send(l, k, 79, T0 + 60_000);
    evictKey(l, T0 + 61_000);
    expect(heard()).toHaveLength(2);
    send(l, k, 1, T0 + 62_000);
    expect(heard()).toEqual([
      [0.8, 80],
      [0.95, 95],
      [0.8, 80],
    ]);
  });

  it('keys sharing both cells of a tiny sketch: warnings may come early, never twice, never late', () => {
    // sketch_cells 4: one cell a row, every key's count in the same two cells.
    const warnings: QuotaWarning[] = [];
    const cfg = { ...values, ratelimit: { max_buckets: SLOTS, sketch_cells: 4 } };
    // A fixed hash seed: where the keys' buckets land, and so which evictions take them, is the same each run.
    const layout = allocateBuckets(SLOTS, 4, [SEED0, 99]);
    const l = new RateLimiter(loadConfig({ values: cfg }), layout, (w) => warnings.push(w));
    const keys = ['a', 'b'].map((id) => keyRecord(`quota_${id}`, 'production', k.rate_limit));
    // A fixed pseudo-random run: each step a request from one key, or every key evicted.
    let x = 12345;
    const next = () => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return x >>> 16;
    };
    const used = new Map<string, number>();
    let early = 0;
    for (let step = 0, now = T0; step < 400; step++, now += 100) {
      const r = next() % 20;
      if (r === 0) {
        evictKey(l, now);
        continue;
      }
      const key = keys[r % 2] as KeyRecord;
      const n = (used.get(key.id) ?? 0) + 1;
      used.set(key.id, n);
      send(l, key, 1, now);
      for (const t of [80, 95]) {
        const heard = warnings.filter((w) => w.key.id === key.id && w.threshold * 100 === t);
        // Never twice; never late: raised by the time its own count reaches it.
        expect(heard.length).toBeLessThanOrEqual(1);
        if (n >= t) expect(heard).toHaveLength(1);
        if (n === t && heard[0]?.used !== t) early++;
      }
    }
    expect([...used.values()].every((n) => n >= 95)).toBe(true);
    // The two keys' counts shared cells: some warnings came early.
    expect(early).toBeGreaterThan(0);
  });

  it('the quota sketch is saved with the buckets: a restart after the eviction goes on counting', () => {
    const { l } = setup();
    send(l, k, 70, T0);
    evictKey(l, T0 + 1_000);
    const bytes = encodeBuckets(l.layout, T0 + 1_000);
    const back = decodeBuckets(bytes, SLOTS, CELLS, T0 + 1_000);
    expect(back).not.toBeNull();
    const again = setup(back as SharedBucketsLayout);
    send(again.l, k, 9, T0 + 2_000);
    expect(again.heard()).toEqual([]);
    send(again.l, k, 1, T0 + 2_000);
    expect(again.heard()).toEqual([[0.8, 80]]);
    // Read back into a sketch of another size: the cells are dropped (they are the hash
    // modulo the size), and the count starts again, as before the quota sketch.
    const other = decodeBuckets(bytes, SLOTS, CELLS * 2, T0 + 1_000);
    const third = setup(other as SharedBucketsLayout);
    send(third.l, k, 79, T0 + 2_000);
    expect(third.heard()).toEqual([]);
  });

  it('a buckets file written before the quota sketch still loads: its buckets and debts, the quota sketch empty', () => {
    // The file as written until now: "WGB1", the seed, sketch cells, buckets, debt cells, 0.
    const seed: [number, number] = [7, 11];
    const entry = Buffer.alloc(56);
    // A bucket: its hash, quota level and count; tokens, last refill, burst, rate, quota window.
    entry.writeInt32LE(123, 0);
    entry.writeInt32LE(457, 4);
    for (const [c, v] of [0, T0, 10, 10 / 3_600_000, -1].entries()) entry.writeDoubleLE(v, 16 + c * 8);
    const cell = Buffer.alloc(12);
    cell.writeUInt32LE(5, 0);
    cell.writeDoubleLE(T0 + 3_600_000, 4);
    const head = Buffer.alloc(28);
    head.writeUInt32LE(0x57474231, 0);
    head.writeInt32LE(seed[0], 4);
    head.writeInt32LE(seed[1], 8);
    head.writeUInt32LE(CELLS, 12);
    head.writeUInt32LE(1, 16);
    head.writeUInt32LE(1, 20);
    head.writeUInt32LE(0, 24);
    const back = decodeBuckets(Buffer.concat([head, entry, cell]), SLOTS, CELLS, T0 + 1_000);
    expect(back).not.toBeNull();
    const layout = back as SharedBucketsLayout;
    expect(seedOf(layout)).toEqual(seed);
    const t = new SharedBuckets(layout);
    expect(t.size(T0 + 1_000)).toBe(1);
    expect(t.sketch[5]).toBe(T0 + 3_600_000);
    // The key counts from nothing in it.
    const { l, heard } = setup(layout);
    send(l, k, 79, T0 + 2_000);
    expect(heard()).toEqual([]);
    send(l, k, 1, T0 + 2_000);
    expect(heard()).toEqual([[0.8, 80]]);
    // Written again, it reads back the same way.
    expect(decodeBuckets(encodeBuckets(layout, T0 + 2_000), SLOTS, CELLS, T0 + 2_000)).not.toBeNull();
  });
});
