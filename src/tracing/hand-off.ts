import { type SpanInput, spansOf } from './span-input.js';

/** An edge thread's span inputs leave in batches of at most this many, or every interval. */
const BATCH = 256;
const INTERVAL_MS = 100;

/**
 * An edge thread's span inputs, handed to the control thread in batches (a message
 * per batch, not per request). What waits is bounded: past `max`, inputs are
 * dropped and counted, as the control thread's queue would drop them.
 */
export function spansToControl(o: { send: (spans: SpanInput[]) => void; max: number; dropped: (n: number) => void }): {
  push(s: SpanInput): void;
  close(): void;
} {
  let batch: SpanInput[] = [];
  const flush = () => {
    if (batch.length === 0) return;
    o.send(batch);
    batch = [];
  };
  const timer = setInterval(flush, INTERVAL_MS);
  timer.unref();
  return {
    push(s) {
      if (batch.length >= o.max) return o.dropped(spansOf(s));
      batch.push(s);
      if (batch.length >= BATCH) flush();
    },
    close() {
      clearInterval(timer);
      flush();
    },
  };
}
