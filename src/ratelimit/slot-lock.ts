/**
 * A mutex on one Int32 cell of shared memory (0 free, 1 held, 2 held with waiters),
 * after Drepper's "Futexes are tricky": uncontended, one compare-and-swap to take and
 * one to give. Every loop is bounded: a holder does a few hundred nanoseconds of
 * arithmetic, so a lock still held after `MAX_WAITS` waits of a millisecond belongs to
 * a thread that died inside its decision (a terminated worker), and is taken over
 * rather than waited on forever.
 */

/** Spins this many times before sleeping on a contended lock. */
const SPINS = 100;
/** Waits of 1 ms before a lock is taken to be a dead thread's. */
const MAX_WAITS = 500;

/** What the locks did, for tests and metrics: locks taken over from a dead holder. */
export const lockStats = { broken: 0 };

export function lock(i: Int32Array, at: number): void {
  let c = Atomics.compareExchange(i, at, 0, 1);
  if (c === 0) return;
  for (let n = 0; n < SPINS; n++) {
    if (Atomics.load(i, at) === 0) {
      c = Atomics.compareExchange(i, at, 0, 1);
      if (c === 0) return;
    }
  }
  if (c !== 2) c = Atomics.exchange(i, at, 2);
  for (let n = 0; c !== 0; n++) {
    if (n === MAX_WAITS) {
      // Held for half a second by a thread that no longer runs: ours now (marked contended).
      lockStats.broken++;
      Atomics.store(i, at, 2);
      return;
    }
    Atomics.wait(i, at, 2, 1);
    c = Atomics.exchange(i, at, 2);
  }
}

export function unlock(i: Int32Array, at: number): void {
  if (Atomics.sub(i, at, 1) !== 1) {
    Atomics.store(i, at, 0);
    Atomics.notify(i, at, 1);
  }
}
