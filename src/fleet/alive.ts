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
 * minute. The last count is remembered: while Redis cannot answer, each instance
 * enforces each bucket at 1/instances of it (on_unavailable: local).
 */
export class Heartbeat {
  /** Instances alive in the last minute, as last heard from Redis (1 until then). */
  instances = 1;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly co: Coordinator,
    private readonly heard: (instances: number) => void = () => {},
  ) {}

  /** One beat; Redis unreachable: the last count stays. */
  async beat(): Promise<number> {
    try {
      const n = Number(await this.co.run(ALIVE, [ALIVE_KEY], [this.co.owner, ALIVE_MS], 'alive', 1000));
      if (Number.isFinite(n) && n >= 1) {
        this.instances = n;
        this.heard(n);
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
