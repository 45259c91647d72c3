/**
 * Waits for a Redis reply at most `timeoutMs` of Redis's own lateness: the time from
 * the command's write to the socket until its reply arrives. A gateway whose event
 * loop is busy (a timer that fires late) never counts that as Redis being late.
 *
 * node-redis writes the commands of a turn in one setImmediate queued by sendCommand;
 * an immediate queued right after the call runs once the command is written, so the
 * clock starts there. When the timer fires (on time, or late because the loop was
 * busy), the verdict waits for the check phase of that same turn: the poll phase in
 * between reads every reply already in the socket, so a reply that came back while
 * the loop was busy is in time. Only a reply that had not arrived when the timer fired,
 * at least `timeoutMs` after the write, is late.
 */
export function redisLate<T>(reply: Promise<T>, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | null = null;
    reply.then(
      (r) => {
        settled = true;
        if (timer !== null) clearTimeout(timer);
        resolve(r);
      },
      (e: unknown) => {
        settled = true;
        if (timer !== null) clearTimeout(timer);
        reject(e);
      },
    );
    const verdict = () => {
      if (settled) return;
      settled = true;
      reject(new Error(`no answer within ${timeoutMs} ms`));
    };
    setImmediate(() => {
      if (!settled) timer = setTimeout(() => setImmediate(verdict), timeoutMs);
    });
  });
}
