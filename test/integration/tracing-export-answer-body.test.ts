// Regression tests from a review of the OTLP export path (2026-11-28): a 2xx whose answer body breaks or trickles.
import { afterEach, describe, expect, it } from 'vitest';
import { attempt, collector, tracingTo, until } from '../helpers/otlp-collector.js';

/*
 * OTLP/HTTP: a 2xx status says the collector took the export; the body only carries an
 * optional partial success. docs/tracing.md counts as exported "spans the collector accepted"
 * and, for the endless answer, says the export is "counted as accepted". But otlpPost reads the
 * 2xx body inside the POST: when that read fails (the connection closes mid-body) or is cut by
 * export_timeout_ms (a collector/relay that trickles its answer), the POST rejects, the exporter
 * takes it as "no answer" (status 0), re-sends the same spans (the collector stores them twice)
 * and finally counts them as export_failed although the collector accepted every copy.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('an export answered 2xx whose answer body does not arrive whole', () => {
  it('a 200 whose connection closes mid-body: counted exported, never sent again', async () => {
    const c = await collector((_n, _req, res) => {
      // The status line and 4 of the 64 announced bytes, then the connection drops.
      res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '64' });
      res.write(Buffer.from([0x0a, 0x00, 0x0a, 0x00]));
      setTimeout(() => res.socket?.destroy(), 20);
    });
    cleanups.push(c.close);
    const t = tracingTo(c.url, { max_retries: 2 });
    cleanups.push(() => t.tracing.close());
    t.tracing.webhook(attempt());
    // Long enough for the current code's retries (backoffs 0.5-1 s and 1-2 s).
    await until(
      async () =>
        (await t.metric('wakegate_trace_spans_exported_total')) +
          (await t.metric('wakegate_trace_spans_dropped_total{reason="export_failed"}')) >=
        1,
      6000,
    );
    await new Promise((r) => setTimeout(r, 200));
    // The collector took the export (200): sending it again only duplicates the span there.
    expect(c.seen(), 'export requests the collector received for one span').toBe(1);
    expect(await t.metric('wakegate_trace_spans_exported_total')).toBe(1);
    expect(await t.metric('wakegate_trace_spans_dropped_total{reason="export_failed"}')).toBe(0);
  }, 15_000);

  it('a 200 whose body trickles past export_timeout_ms: counted exported, never sent again', async () => {
    const c = await collector((_n, _req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '64' });
      // One byte every 100 ms: the whole body would take 6.4 s, past the 400 ms timeout.
      const iv = setInterval(() => {
        if (res.destroyed || res.writableEnded) return clearInterval(iv);
        res.write(Buffer.from([0x00]));
      }, 100);
      res.on('close', () => clearInterval(iv));
    });
    cleanups.push(c.close);
    const t = tracingTo(c.url, { max_retries: 1, export_timeout_ms: 400 });
    cleanups.push(() => t.tracing.close());
    t.tracing.webhook(attempt());
    await until(
      async () =>
        (await t.metric('wakegate_trace_spans_exported_total')) +
          (await t.metric('wakegate_trace_spans_dropped_total{reason="export_failed"}')) >=
        1,
      6000,
    );
    await new Promise((r) => setTimeout(r, 200));
    expect(c.seen(), 'export requests the collector received for one span').toBe(1);
    expect(await t.metric('wakegate_trace_spans_exported_total')).toBe(1);
    expect(await t.metric('wakegate_trace_spans_dropped_total{reason="export_failed"}')).toBe(0);
  }, 15_000);
});
