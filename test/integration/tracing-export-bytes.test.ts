import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/index.js';
import { tracingDefaults } from '../../src/config/tracing.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import type { Timers } from '../../src/tracing/exporter.js';
import { createTracing, type Tracing } from '../../src/tracing/index.js';
import type { WebhookAttempt } from '../../src/tracing/webhook-spans.js';
import { decodeSpans } from '../helpers/otlp-receiver.js';

// An export request's size, through the real exporter and its real POST to a collector on
// loopback that refuses bodies past a bound of its own (413, as the OpenTelemetry
// Collector's OTLP/HTTP receiver does past max_request_body_size). The exporter's bound
// is given through createTracing's options; its timers are the test's.

/** A collector refusing bodies over `limit` bytes with a 413, taking the others (their spans decoded). */
async function collector(limit: number) {
  const sizes: number[] = [];
  const refused: number[] = [];
  const names: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      sizes.push(body.length);
      if (body.length > limit) {
        refused.push(body.length);
        res.writeHead(413, { 'content-type': 'text/plain' });
        res.end('request body too large');
        return;
      }
      for (const s of decodeSpans(body)) names.push(String(s.attributes['wakegate.delivery_id']));
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    sizes,
    refused,
    names,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Timers on the test's clock: `next()` runs the earliest one due and says how long after now it was. */
function clock() {
  let now = 0;
  let seq = 0;
  const due = new Map<number, { at: number; fn: () => void }>();
  const timers: Timers = {
    setTimeout(fn, ms) {
      due.set(++seq, { at: now + ms, fn });
      return seq;
    },
    clearTimeout(h) {
      due.delete(h as number);
    },
  };
  const next = (): number => {
    const [id, t] = [...due.entries()].sort((a, b) => a[1].at - b[1].at)[0] ?? [];
    if (id === undefined || t === undefined) throw new Error('no timer armed');
    due.delete(id);
    const after = t.at - now;
    now = t.at;
    t.fn();
    return after;
  };
  return { timers, next, waits: () => [...due.values()].map((t) => t.at - now) };
}

/** The POST's own timeout (armed while a request waits for its answer): told apart from the flush timers. */
const TIMEOUT = 7777;

const until = async (ok: () => boolean) => {
  for (let i = 0; i < 400 && !ok(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(ok()).toBe(true);
};

/** An attempt; `pad` makes its span larger (an event type no real event has: a receiver URL's path is not exported). */
const attempt = (i: number, pad = ''): WebhookAttempt => ({
  kind: 'webhook',
  deliveryId: `del_${String(i).padStart(4, '0')}`,
  eventType: `wake.error${pad}`,
  attempt: 1,
  url: 'https://hooks.example.com/in',
  payload: '{}',
  startMs: 1_700_000_000_000 + i,
  durationMs: 5,
  status: 200,
  error: null,
});

describe('tracing: an export request never exceeds its byte bound', () => {
  let tracing: Tracing | null = null;
  let stop: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await tracing?.close();
    await stop?.();
    tracing = null;
    stop = null;
  });

  const start = (url: string, k: ReturnType<typeof clock>, maxExportBytes: number, lines: string[] = []) => {
    const metrics = createMetrics({ process: false });
    tracing = createTracing({
      cfg: {
        tracing: {
          ...tracingDefaults,
          otlp_url: url,
          // A batch of up to 10,000 spans: far past the bound below.
          batch_size: 10_000,
          queue_size: 20_000,
          flush_interval_ms: 1000,
          export_timeout_ms: TIMEOUT,
        },
        routes: [] as unknown as Config['routes'],
      },
      log: createLogger('warn', (l) => lines.push(l)),
      metrics,
      timers: k.timers,
      maxExportBytes,
    });
    return metrics;
  };
  /** Runs the exporter's timers, each POST answered before the next, until `ok`. */
  const drive = async (k: ReturnType<typeof clock>, ok: () => boolean) => {
    for (let i = 0; i < 200 && !ok(); i++) {
      await until(() => !k.waits().includes(TIMEOUT));
      if (k.waits().length === 0) break;
      k.next();
      await until(() => !k.waits().includes(TIMEOUT));
    }
  };
  const dropped = async (metrics: ReturnType<typeof createMetrics>, reason: string) => {
    const m = new RegExp(`^wakegate_trace_spans_dropped_total\\{reason="${reason}"\\} (\\d+)$`, 'm');
    return Number(m.exec(await metrics.registry.metrics())?.[1] ?? 0);
  };

  it('splits a batch past the bound into requests within it, the rest leaving at once', async () => {
    const c = await collector(4096);
    stop = c.close;
    const k = clock();
    const metrics = start(c.url, k, 4096);
    for (let i = 0; i < 200; i++) tracing?.webhook(attempt(i));
    // One batch (200 spans, about 40 KB encoded): the flush.
    expect(k.next()).toBe(1000);
    await until(() => !k.waits().includes(TIMEOUT));
    expect(c.sizes).toHaveLength(1);
    // What did not fit leaves next, at once: not a flush interval later.
    expect(k.waits()).toEqual([0]);
    await drive(k, () => c.names.length === 200);
    expect(c.refused).toEqual([]);
    expect(Math.max(...c.sizes)).toBeLessThanOrEqual(4096);
    expect(c.sizes.length).toBeGreaterThanOrEqual(10);
    // Every span, once, in the order it came.
    expect(c.names).toEqual(Array.from({ length: 200 }, (_, i) => `del_${String(i).padStart(4, '0')}`));
    expect(await dropped(metrics, 'export_failed')).toBe(0);
    expect(await dropped(metrics, 'rejected')).toBe(0);
  });

  it('drops a span larger than the bound alone, counted; the others leave', async () => {
    const c = await collector(4096);
    stop = c.close;
    const k = clock();
    const lines: string[] = [];
    const metrics = start(c.url, k, 4096, lines);
    tracing?.webhook(attempt(0));
    tracing?.webhook(attempt(1, `/${'x'.repeat(6000)}`));
    tracing?.webhook(attempt(2));
    await drive(k, () => c.names.length === 2);
    expect(c.names).toEqual(['del_0000', 'del_0002']);
    expect(c.refused).toEqual([]);
    expect(await dropped(metrics, 'export_failed')).toBe(1);
    expect(lines.some((l) => l.includes('a span could not be written') && l.includes('4096'))).toBe(true);
  });

  it('a 413 from a collector with a lower bound: never sent again as it was, its spans sent in smaller requests', async () => {
    // Our bound 64 KiB, the collector's 4 KiB.
    const c = await collector(4096);
    stop = c.close;
    const k = clock();
    const lines: string[] = [];
    const metrics = start(c.url, k, 65_536, lines);
    for (let i = 0; i < 200; i++) tracing?.webhook(attempt(i));
    await drive(k, () => c.names.length === 200);
    expect(c.names).toHaveLength(200);
    expect(new Set(c.names).size).toBe(200);
    // Each refusal at most halves what is sent next: a few 413s, none of the same size twice.
    expect(c.refused.length).toBeGreaterThan(0);
    expect(c.refused.length).toBeLessThanOrEqual(5);
    expect(new Set(c.refused).size).toBe(c.refused.length);
    expect(await dropped(metrics, 'rejected')).toBe(0);
    expect(lines.filter((l) => l.includes('too large (413)'))).toHaveLength(1);
  });

  it('a collector refusing even the smallest requests: each batch dropped as rejected, never asked forever', async () => {
    const c = await collector(300);
    stop = c.close;
    const k = clock();
    const metrics = start(c.url, k, 65_536);
    for (let i = 0; i < 200; i++) tracing?.webhook(attempt(i));
    await drive(k, () => false);
    expect(k.waits()).toEqual([]);
    expect(c.names).toEqual([]);
    expect(await dropped(metrics, 'rejected')).toBe(200);
    // Halved down to the floor (1 KiB), then one request per batch.
    expect(c.sizes.length).toBeLessThan(60);
    expect(Math.min(...c.sizes)).toBeGreaterThan(300);
  });

  it('a 413 for one span alone: dropped as rejected, not asked again', async () => {
    const c = await collector(1024);
    stop = c.close;
    const k = clock();
    const metrics = start(c.url, k, 65_536);
    tracing?.webhook(attempt(0, `/${'y'.repeat(2000)}`));
    await drive(k, () => c.sizes.length >= 1);
    await until(() => !k.waits().includes(TIMEOUT));
    expect(k.waits()).toEqual([]);
    expect(c.sizes).toHaveLength(1);
    expect(c.refused).toHaveLength(1);
    expect(await dropped(metrics, 'rejected')).toBe(1);
  });
});
