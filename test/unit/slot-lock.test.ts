import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { allocateBuckets, SharedBuckets } from '../../src/ratelimit/shared-buckets.js';
import { LockStalled } from '../../src/ratelimit/slot-lock.js';
import { FROM_SOURCES } from '../helpers/child.js';

/**
 * The shared table's locks with real threads (test/fixtures/lock-staller.mjs, on the
 * sources). A holder stalled past the old break time (500 ms: a long GC pause, a
 * throttled container) keeps its lock, so no second thread decides on the same bucket
 * at once; a thread that died holding a lock has it released by the thread that made
 * the table.
 */
const STALLER = fileURLToPath(new URL('../fixtures/lock-staller.mjs', import.meta.url));
const NOW = 1_000_000;

interface Out {
  spent: number;
  lockStats: { stalled: number; notHeld: number; released: number };
}

function run(w: Worker): Promise<Out> {
  return new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
}

/** A staller holding the bucket for `stallMs` while `takers` threads each ask `n` times: what each spent. */
async function stalledHolder(o: { burst: number; stallMs: number; takers: number; n: number }) {
  const layout = allocateBuckets(64, 64, [7, 11]);
  const flag = new SharedArrayBuffer(4);
  const common = { layout, flag, burst: o.burst, now: NOW };
  const staller = new Worker(STALLER, {
    execArgv: FROM_SOURCES,
    workerData: { ...common, role: 'staller', stallMs: o.stallMs },
  });
  const takers = Array.from(
    { length: o.takers },
    () => new Worker(STALLER, { execArgv: FROM_SOURCES, workerData: { ...common, role: 'taker', n: o.n } }),
  );
  const outs = await Promise.all([run(staller), ...takers.map(run)]);
  await Promise.all([staller, ...takers].map((w) => w.terminate()));
  return outs;
}

describe('a bucket lock whose holder stalls', () => {
  it('keeps out every other thread until the holder unlocks, stalled 1.5 s: one token, one spent', async () => {
    const [staller, ...takers] = await stalledHolder({ burst: 1, stallMs: 1500, takers: 2, n: 3 });
    const spent = (staller?.spent ?? 0) + takers.reduce((a, t) => a + t.spent, 0);
    expect(staller?.spent).toBe(1);
    expect(spent).toBe(1);
    // The holder's unlock found its own lock; the takers waited past 500 ms rather than break in.
    expect(staller?.lockStats.notHeld).toBe(0);
    expect(takers.some((t) => t.lockStats.stalled > 0)).toBe(true);
  }, 30_000);

  it('never spends more than the bucket holds, whatever the stall, burst and askers (property, real threads)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 550, max: 900 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 5 }),
        async (burst, stallMs, takers, n) => {
          const outs = await stalledHolder({ burst, stallMs, takers, n });
          const spent = outs.reduce((a, t) => a + t.spent, 0);
          expect(spent).toBe(Math.min(burst, 1 + takers * n));
        },
      ),
      { numRuns: 4 },
    );
  }, 60_000);
});

describe('the main thread waiting on a stalled edge thread', () => {
  it('gives up past its wait (LockStalled, nothing held, no decision) instead of blocking the thread that hears of deaths', async () => {
    const layout = allocateBuckets(64, 64, [7, 11]);
    const flag = new SharedArrayBuffer(4);
    const staller = new Worker(STALLER, {
      execArgv: FROM_SOURCES,
      workerData: { layout, flag, burst: 2, now: NOW, role: 'staller', stallMs: 2500 },
    });
    const done = run(staller);
    while (Atomics.load(new Int32Array(flag), 0) === 0) await new Promise((r) => setTimeout(r, 5));
    const table = new SharedBuckets(layout);
    const ref = { tag: 'k', id: 'stalled', burst: 2, rate: 1e-9 };
    const t0 = performance.now();
    expect(() => table.acquire(ref, NOW)).toThrow(LockStalled);
    expect(performance.now() - t0).toBeLessThan(2400);
    expect((await done).spent).toBe(1);
    await staller.terminate();
    // The claim lock was not left held: the main thread decides now that the holder is done.
    const s = table.acquire(ref, NOW);
    expect(table.refill(s, NOW, 2, 1e-9)).toBe(1);
    table.unlock(s);
  }, 30_000);
});

describe('a thread that dies holding a bucket lock', () => {
  it('has its lock released by the table owner, and another thread then decides', async () => {
    const layout = allocateBuckets(64, 64, [7, 11]);
    const flag = new SharedArrayBuffer(4);
    const common = { layout, flag, burst: 2, now: NOW };
    const dier = new Worker(STALLER, { execArgv: FROM_SOURCES, workerData: { ...common, role: 'dier' } });
    const owner = dier.threadId + 1;
    await new Promise((r) => dier.once('exit', r));
    const table = new SharedBuckets(layout);
    // Someone else's lock is not released by naming another owner.
    expect(table.releaseThread(owner + 1000)).toBe(0);
    expect(table.releaseThread(owner)).toBe(1);
    Atomics.store(new Int32Array(flag), 0, 1);
    const taker = new Worker(STALLER, { execArgv: FROM_SOURCES, workerData: { ...common, role: 'taker', n: 3 } });
    const out = await Promise.race([run(taker), new Promise<null>((r) => setTimeout(() => r(null), 10_000).unref())]);
    await taker.terminate();
    expect(out?.spent).toBe(2);
  }, 30_000);
});
