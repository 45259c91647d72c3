// Regression tests from a review of the OTLP export path (2026-11-28): a stop while the collector asked to be left alone (Retry-After).
import { afterEach, describe, expect, it } from 'vitest';
import { attempt, collector, tracingTo, until } from '../helpers/otlp-collector.js';

/*
 * A collector answers 503 (or 429) with Retry-After: 60: it asked to be left alone for a
 * minute (OTLP/HTTP: the client SHOULD honour it; docs/tracing.md: Retry-After is "honoured up
 * to a minute"). If the gateway stops during that wait, SpanExporter.close() drops the batch
 * waiting for its retry ("the collector was failing") but then, since nothing was in flight,
 * takes the collector for healthy and POSTs everything else that waits to it at once:
 * the throttled collector is hit again immediately, and the stop spends up to 2 s on it.
 * Expected: a collector that is failing/throttling at the stop is not sent more; what waits is
 * dropped and counted as export_failed.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('a stop during a Retry-After wait', () => {
  for (const status of [503, 429]) {
    it(`${status} Retry-After: 60, then a stop: nothing more is sent to that collector`, async () => {
      const c = await collector((n, _req, res) => {
        res.writeHead(n === 1 ? status : 200, n === 1 ? { 'retry-after': '60' } : {});
        res.end();
      });
      cleanups.push(c.close);
      const t = tracingTo(c.url, { max_retries: 3, flush_interval_ms: 10 });
      t.tracing.webhook(attempt());
      // The first export is answered 503/429: its retry now waits a minute.
      expect(await until(() => c.seen() === 1, 3000)).toBe(true);
      await new Promise((r) => setTimeout(r, 100));
      // More spans wait meanwhile (the exporter is busy with the batch to retry).
      t.tracing.webhook(attempt());
      t.tracing.webhook(attempt());
      await t.tracing.close();
      await new Promise((r) => setTimeout(r, 100));
      expect(c.seen(), 'export requests the throttling collector received').toBe(1);
      expect(await t.metric('wakegate_trace_spans_dropped_total{reason="export_failed"}')).toBe(3);
    });
  }
});
