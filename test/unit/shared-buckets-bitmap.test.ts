import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { RateLimiter } from '../../src/ratelimit/limiter.js';
import { encodeBuckets } from '../../src/ratelimit/persist.js';
import { SharedBuckets } from '../../src/ratelimit/shared-buckets.js';
import { FROM_SOURCES } from '../helpers/child.js';

const WORKER = fileURLToPath(new URL('../fixtures/bitmap-churn-worker.mjs', import.meta.url));

/** Every slot holding a bucket has its bit set (the bitmap's invariant), by a full scan. */
function unmarked(t: SharedBuckets): number[] {
  const i32 = (t as unknown as { i32: Int32Array }).i32;
  const used = (t as unknown as { used: Int32Array }).used;
  const bad: number[] = [];
  for (let s = 0; s < t.slots; s++) {
    const h2 = i32[(s + 1) * 16 + 2];
    const bit = (used[s >>> 5] as number) & (1 << (s & 31));
    if (h2 !== 0 && bit === 0) bad.push(s);
  }
  return bad;
}

// Four edge threads claim and evict in a small table while the control thread sweeps
// and snapshots; time moves so buckets fill again. Then the invariant is checked.
it('keeps every held slot marked under concurrent claims, evictions and sweeps', async () => {
  const values = { ratelimit: { max_buckets: 256, sketch_cells: 1024 } };
  const limiter = new RateLimiter(loadConfig({ values }), undefined);
  const t = new SharedBuckets(limiter.layout);
  const clock = new SharedArrayBuffer(8);
  const now = new Float64Array(clock);
  now[0] = Date.UTC(2026, 0, 1);
  const workers = [1, 2, 3, 4].map(
    (seed) =>
      new Worker(WORKER, {
        execArgv: FROM_SOURCES,
        workerData: { layout: limiter.layout, values, n: 200_000, seed, clock },
      }),
  );
  const done = Promise.all(
    workers.map(
      (w) =>
        new Promise((r, j) => {
          w.once('message', r);
          w.once('error', j);
        }),
    ),
  );
  let finished = false;
  void done.then(() => (finished = true));
  let sweeps = 0;
  let removed = 0;
  while (!finished) {
    now[0] += 2_000; // minute quota windows: buckets free again within ~30 sweeps
    removed += t.sweep(now[0]);
    encodeBuckets(limiter.layout, now[0]);
    sweeps++;
    expect(unmarked(t)).toEqual([]);
    await new Promise((r) => setTimeout(r, 1));
  }
  await done;
  await Promise.all(workers.map((w) => w.terminate()));
  console.log({ sweeps, removed, size: t.size(now[0]) });
  expect(removed).toBeGreaterThan(0);
  expect(unmarked(t)).toEqual([]);
}, 120_000);
