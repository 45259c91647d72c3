/**
 * Watches a transfer's progress every `ms` and calls `stalled` when it made none
 * over a whole window. A window in which this process itself was late (its event
 * loop busy for longer than half a window past the tick) proves nothing about the
 * client, who could not be written to meanwhile: it is not judged, and the next
 * window starts from there. `fromNow` false: the first window starts at the first
 * tick (what is written right after the call is not yet the client's to take).
 * Progress is a count that only grows. Returns a stop function.
 */
export function watchProgress(
  progress: () => number,
  ms: number,
  stalled: () => void,
  o: { fromNow?: boolean; now?: () => number } = {},
): () => void {
  const clock = o.now ?? (() => performance.now());
  let seen = o.fromNow === false ? -1 : progress();
  let tick = clock();
  const timer = setInterval(() => {
    const now = clock();
    const late = now - tick > ms * 1.5;
    tick = now;
    const p = progress();
    if (p > seen || late) {
      seen = p;
      return;
    }
    clearInterval(timer);
    stalled();
  }, ms);
  timer.unref();
  return () => clearInterval(timer);
}
