import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { replaceFileLater } from '../durable.js';
import type { Coordinator } from './redis.js';
import { ALIVE } from './scripts.js';

/** How often an instance says it is alive. */
export const BEAT_MS = 3000;
/** An instance counts as alive when it said so within this (DESIGN: the last minute). */
export const ALIVE_MS = 60_000;
/** The sorted set of instance ids, scored by when each last said it is alive (Redis's clock). */
export const ALIVE_KEY = 'wg:alive';

/**
 * The fleet's heartbeat: each deciding instance (an edge thread counts as one) marks
 * itself alive in Redis every few seconds and learns how many were alive in the last
 * minute. The count split by is the largest heard in the last minute: a Redis that
 * restarts empty (or whose set is deleted) answers 1 to the first instance to beat after,
 * which must not then take whole buckets. While Redis cannot answer, each instance
 * enforces each bucket at 1/instances of it (on_unavailable: local).
 */
export class Heartbeat {
  /** Instances alive in the last minute: the most Redis said in it (`start` until it first answers). */
  instances: number;
  private timer: NodeJS.Timeout | null = null;
  /** The counts Redis gave in the last minute, oldest first, with when (monotonic ms). */
  private readonly counts: { n: number; at: number }[] = [];

  /**
   * `start`: the count to split by before Redis first answers (a start during an outage):
   * what the data directory remembers of the last count heard, and at least this
   * process's own deciding threads. `heard` is told each count Redis gives.
   */
  constructor(
    private readonly co: Coordinator,
    private readonly heard: (instances: number) => void = () => {},
    start = 1,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.instances = Math.max(1, start);
  }

  /** One beat; Redis unreachable: the last count stays. */
  async beat(): Promise<number> {
    try {
      const n = Number(await this.co.run(ALIVE, [ALIVE_KEY], [this.co.owner, ALIVE_MS], 'alive', 1000));
      if (Number.isFinite(n) && n >= 1) {
        const t = this.now();
        this.counts.push({ n, at: t });
        while ((this.counts[0]?.at ?? t) <= t - ALIVE_MS) this.counts.shift();
        let most = 1;
        for (const c of this.counts) most = Math.max(most, c.n);
        this.instances = most;
        this.heard(most);
      }
    } catch {
      // Not heard: the count from before the outage is the one to split by.
    }
    return this.instances;
  }

  start(everyMs = BEAT_MS): void {
    void this.beat();
    this.timer = setInterval(() => void this.beat(), everyMs);
    this.timer.unref();
  }

  /** Stops beating and leaves the set, so a stopped instance no longer shrinks the others' shares. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.co.command(['ZREM', ALIVE_KEY, this.co.owner], 'alive', 1000).catch(() => {});
  }
}

/** Where the data directory remembers the fleet's last count (a hint for a start while Redis is away). */
export const INSTANCES_FILE = 'fleet-instances';
const MAX_REMEMBERED = 100_000;

/** The count the data directory remembers, or 0 (none, or not a count). */
export function rememberedInstances(dir: string): number {
  try {
    const n = Number(readFileSync(join(dir, INSTANCES_FILE), 'utf8').trim());
    return Number.isInteger(n) && n >= 1 && n <= MAX_REMEMBERED ? n : 0;
  } catch {
    return 0;
  }
}

/**
 * Remembers each new count heard in `dir` (written aside and renamed, off the event loop;
 * a count that changes again meanwhile is written after). A hint only: a failure is logged
 * once and costs nothing else.
 */
export function instancesMemory(dir: string, onError: (e: Error) => void): (n: number) => void {
  let written = rememberedInstances(dir);
  let writing = false;
  let next = 0;
  let failed = false;
  const write = (): void => {
    const n = next;
    if (writing || n === written) return;
    writing = true;
    const path = join(dir, INSTANCES_FILE);
    // Written aside and renamed (no temporary file left when that fails).
    replaceFileLater(path, Buffer.from(`${n}\n`))
      .then(
        () => {
          written = n;
        },
        (e: Error) => {
          // Not retried until the count changes again.
          written = n;
          if (!failed) onError(e);
          failed = true;
        },
      )
      .finally(() => {
        writing = false;
        write();
      });
  };
  return (n: number) => {
    next = n;
    write();
  };
}

/**
 * This process's own deciding instances: each edge thread, and the control thread (its
 * /v2 calls) beside them; one thread alone when it serves everything.
 */
export const localDeciders = (threads: number): number => (threads > 1 ? threads + 1 : 1);
