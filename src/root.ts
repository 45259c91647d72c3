import type { Logger } from './log.js';

/** One subsystem of a composition root: what it is called, and how it closes. */
export interface Part {
  readonly name: string;
  close?(): Promise<void> | void;
}

/**
 * A composition root's subsystems, in the order they were built. They close in the
 * reverse order, so each closes while everything it uses is still open: stop order
 * follows from the list.
 */
export class Parts {
  private readonly list: Part[] = [];

  add<T extends Part>(part: T): T {
    this.list.push(part);
    return part;
  }

  /** Closes every part, last built first; a part that fails to close is logged and the rest still close. */
  async close(log: Logger): Promise<void> {
    for (const p of this.list.reverse()) {
      try {
        await p.close?.();
      } catch (e) {
        log.error('a subsystem failed to close', { subsystem: p.name, err: e as Error });
      }
    }
    this.list.length = 0;
  }
}
