// Regression tests from a review of tracing (2026-11-28): spans handed to the exporter once it has stopped are counted as
// wakegate_trace_spans_dropped_total{reason="queue_full"} (src/tracing/exporter.ts add():
// `this.closed || ... > queueSize` -> 'queue_full'), though the queue is empty. docs/tracing.md:
// queue_full is "the queue was full"; export_failed covers "every retry failed, the stop came, ...".
// An operator reading queue_full after a restart would raise queue_size for nothing.
import { describe, expect, it } from 'vitest';
import { SpanExporter, type Timers } from '../../src/tracing/exporter.js';

const timers: Timers = { setTimeout: () => 0, clearTimeout: () => {} };

describe('review tracing: spans after the stop', () => {
  it('are not counted as queue_full when the queue is empty', async () => {
    const counts: Record<string, number> = { queue_full: 0, export_failed: 0, rejected: 0 };
    const e = new SpanExporter<number>({
      queueSize: 100,
      batchSize: 10,
      flushIntervalMs: 100,
      timeoutMs: 1000,
      maxRetries: 2,
      count: () => 1,
      encode: () => new Uint8Array([0]),
      post: async () => 200,
      timers,
      exported: () => {},
      dropped: (reason, n) => {
        counts[reason] = (counts[reason] ?? 0) + n;
      },
      queued: () => {},
      failed: () => {},
      unwritable: () => {},
    });
    await e.close();
    e.add(1);
    expect(counts.queue_full).toBe(0);
    expect(counts.export_failed).toBe(1);
  });
});
