import type { IncomingMessage, ServerResponse } from 'node:http';
import { watchProgress } from './stall.js';

/** What an edge holds, at most, of /v2 answers for clients not reading them yet (all answers together). */
export const HANDOVER_BUFFER_BYTES = 16 * 1_048_576;

/** How /v2 answers handed back by the control thread are relayed to slow clients. */
export interface AnswerLimits {
  /** server.send_timeout_ms: a client that reads nothing for this long is cut off. */
  sendTimeoutMs: number;
  /** The edge's budget for answer bytes waiting on clients; past it, answers are read at the client's pace. */
  budgetBytes: number;
}

/** The answer bytes one edge holds for clients, all answers together. */
export class AnswerBudget {
  held = 0;
  constructor(readonly limit: number) {}
  get over(): boolean {
    return this.held > this.limit;
  }
}

/**
 * Relays an answer from the control thread to the client: at the control thread's
 * speed while the edge's budget holds, paused (the handover socket waits) while it is
 * over; cut when the client takes no byte for `sendTimeoutMs`.
 */
export function relay(o: {
  from: IncomingMessage;
  to: ServerResponse;
  budget: AnswerBudget;
  sendTimeoutMs: number;
}): void {
  const { from, to, budget, sendTimeoutMs } = o;
  let mine = 0; // bytes of this answer counted in the budget (what `to` holds unsent)
  let written = 0;
  let stopWatch: (() => void) | null = null;
  const count = () => {
    const now = to.destroyed ? 0 : to.writableLength;
    budget.held += now - mine;
    mine = now;
  };
  const stopTimer = () => {
    stopWatch?.();
    stopWatch = null;
  };
  const waiting = () => {
    if (stopWatch) return;
    stopWatch = watchProgress(
      () => written - to.writableLength,
      sendTimeoutMs,
      () => {
        stopWatch = null;
        from.destroy();
        to.destroy();
      },
    );
  };
  from.on('data', (c: Buffer) => {
    written += c.length;
    const ok = to.write(c);
    count();
    if (ok) return;
    waiting();
    if (budget.over) from.pause();
  });
  to.on('drain', () => {
    count();
    stopTimer();
    from.resume();
  });
  from.on('end', () => {
    to.end();
    count();
  });
  to.on('close', () => {
    stopTimer();
    budget.held -= mine;
    mine = 0;
    if (!from.complete) from.destroy();
  });
}

/**
 * Cuts `res` when its client takes no byte of it for `sendTimeoutMs` (the answer
 * written whole at once, as the control thread's /v2 answers are with threads: 1).
 */
export function cutWhenStalled(res: ServerResponse, sendTimeoutMs: number): void {
  // Progress: bytes taken since the watch began (what is held unsent shrinking), or
  // nothing held at all (then there is nothing to stall on).
  let taken = 0;
  let held = 0;
  const stop = watchProgress(
    () => {
      const now = res.writableLength;
      if (now === 0 || now < held) taken += held - now + 1;
      held = now;
      return taken;
    },
    sendTimeoutMs,
    () => res.destroy(),
    { fromNow: false },
  );
  res.once('close', stop);
}
