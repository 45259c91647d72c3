/**
 * A mutex on one Int32 cell of shared memory that knows its owner: 0 is free, else the
 * holding thread's owner number times two, plus one while others wait (after Drepper's
 * "Futexes are tricky"): uncontended, one compare-and-swap to take and one to give.
 *
 * A lock is never taken from its holder by time: a holder stalled by a GC pause or
 * throttling still runs its decision when it wakes, and a second thread in the same
 * bucket would admit twice on one token. Only a holder that no longer runs gives its
 * locks up: the control thread releases a dead edge thread's locks when it sees it exit
 * (`releaseOwner`), and an unlock that finds the cell no longer its own changes nothing.
 * That thread never waits without bound itself (it could not hear of the death while it
 * waits): past MAX_WAITS its `lock` throws `LockStalled`, and the decision is not made.
 */
import { isMainThread, threadId } from 'node:worker_threads';

/** Spins this many times before sleeping on a contended lock. */
const SPINS = 100;
/** Waits of 1 ms before a wait counts as stalled (then waits are longer). */
const MAX_WAITS = 500;

/** This thread's owner number (threadId + 1, never 0), as a lock cell holds it. */
export const OWNER = threadId + 1;
const ME = OWNER * 2;

/**
 * What the locks did, for tests and metrics: waits that outlasted MAX_WAITS, unlocks of
 * a lock no longer this thread's, locks released for a thread that died.
 */
export const lockStats = { stalled: 0, notHeld: 0, released: 0 };

/** The main thread gave up waiting on a lock: the decision that needed it is not made (never admitted). */
export class LockStalled extends Error {
  constructor() {
    super('a bucket lock held past its wait by another thread');
  }
}

/** Takes the lock at `at`, waiting as long as its holder runs (on the main thread: throws past MAX_WAITS). */
export function lock(i: Int32Array, at: number): void {
  if (Atomics.compareExchange(i, at, 0, ME) === 0) return;
  for (let n = 0; n < SPINS; n++) {
    if (Atomics.load(i, at) === 0 && Atomics.compareExchange(i, at, 0, ME) === 0) return;
  }
  for (let n = 0; ; n++) {
    if (waitOnce(i, at, n < MAX_WAITS ? 1 : 20)) return;
    if (n === MAX_WAITS) {
      lockStats.stalled++;
      if (isMainThread) throw new LockStalled();
    }
  }
}

/**
 * Takes the lock at `at` if it is free within `waits` waits of a millisecond: for work
 * that may skip a slot (a sweep, a snapshot), on a thread that must never wait long.
 */
export function tryLock(i: Int32Array, at: number, waits: number): boolean {
  if (Atomics.compareExchange(i, at, 0, ME) === 0) return true;
  for (let n = 0; n < waits; n++) if (waitOnce(i, at, 1)) return true;
  return false;
}

/** One round of a contended take: true when taken (marked with waiters), else after one wait. */
function waitOnce(i: Int32Array, at: number, ms: number): boolean {
  let c = Atomics.load(i, at);
  if (c === 0) return Atomics.compareExchange(i, at, 0, ME + 1) === 0;
  if ((c & 1) === 0) {
    if (Atomics.compareExchange(i, at, c, c + 1) !== c) return false;
    c += 1;
  }
  Atomics.wait(i, at, c, ms);
  return false;
}

/** Gives the lock at `at` back, if it is still this thread's. */
export function unlock(i: Int32Array, at: number): void {
  const c = Atomics.compareExchange(i, at, ME, 0);
  if (c === ME) return;
  if (c === ME + 1 && Atomics.compareExchange(i, at, ME + 1, 0) === ME + 1) {
    Atomics.notify(i, at, 1);
    return;
  }
  lockStats.notHeld++;
}

/** Releases the lock at `at` if `owner` (a thread that died) holds it; true if it did. */
export function releaseOwner(i: Int32Array, at: number, owner: number): boolean {
  const held = owner * 2;
  if (Atomics.compareExchange(i, at, held, 0) !== held && Atomics.compareExchange(i, at, held + 1, 0) !== held + 1)
    return false;
  lockStats.released++;
  Atomics.notify(i, at);
  return true;
}
