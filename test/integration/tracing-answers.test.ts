import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/index.js';
import { tracingDefaults } from '../../src/config/tracing.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import type { Timers } from '../../src/tracing/exporter.js';
import { createTracing, type Tracing } from '../../src/tracing/index.js';
import { partialSuccess } from '../../src/tracing/partial-success.js';
import type { WebhookAttempt } from '../../src/tracing/webhook-spans.js';

// What a collector's answer says beyond its status, through the real POST to a real
// collector on loopback: how long a 429 or 503 asks to wait (Retry-After, on the
// exporter's injected clock), and a 2xx's partial success (OTLP/HTTP).

const require = createRequire(import.meta.url);
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');
const ExportResponse = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;

/** A collector: `answer(n)` says what the n-th export request gets. */
async function collector(
  answer: (n: number) => { status: number; headers?: Record<string, string>; body?: Uint8Array },
) {
  let seen = 0;
  const agents: (string | undefined)[] = [];
  const server = http.createServer((req, res) => {
    agents.push(req.headers['user-agent']);
    req.resume();
    req.on('end', () => {
      const a = answer(++seen);
      res.writeHead(a.status, { 'content-type': 'application/x-protobuf', ...(a.headers ?? {}) });
      res.end(a.body ?? Buffer.alloc(0));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    seen: () => seen,
    agents,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Timers on a clock of the test's: each one armed is kept with when it is due. */
function clock() {
  let now = 0;
  const due = new Map<number, { at: number; fn: () => void }>();
  let seq = 0;
  const timers: Timers = {
    setTimeout(fn, ms) {
      due.set(++seq, { at: now + ms, fn });
      return seq;
    },
    clearTimeout(h) {
      due.delete(h as number);
    },
  };
  /** Runs the next timer due (its time becomes now); returns how long after now it was due. */
  const next = (): number => {
    const [id, t] = [...due.entries()].sort((a, b) => a[1].at - b[1].at)[0] ?? [];
    if (id === undefined || t === undefined) throw new Error('no timer armed');
    due.delete(id);
    const after = t.at - now;
    now = t.at;
    t.fn();
    return after;
  };
  return { timers, next, armed: () => due.size, waits: () => [...due.values()].map((t) => t.at - now) };
}

/** The POST's own timeout: armed while it waits for its answer. */
const TIMEOUT = 7777;
/** The exporter has the answer: the POST's timeout is gone, and `n` timers are armed. */
const answered = (k: ReturnType<typeof clock>, n: number) => () => !k.waits().includes(TIMEOUT) && k.armed() === n;

const until = async (ok: () => boolean) => {
  for (let i = 0; i < 400 && !ok(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(ok()).toBe(true);
};

const attempt = (): WebhookAttempt => ({
  kind: 'webhook',
  deliveryId: 'del_1',
  eventType: 'wake.error',
  attempt: 1,
  url: 'https://hooks.example.com/in',
  payload: '{}',
  startMs: 1_700_000_000_000,
  durationMs: 5,
  status: 200,
  error: null,
});

describe("tracing: what a collector's answer says", () => {
  let tracing: Tracing | null = null;
  let stop: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await tracing?.close();
    await stop?.();
    tracing = null;
    stop = null;
  });

  const start = (url: string, c: ReturnType<typeof clock>, lines: string[] = []) => {
    const metrics = createMetrics({ process: false });
    tracing = createTracing({
      cfg: {
        tracing: {
          ...tracingDefaults,
          otlp_url: url,
          flush_interval_ms: 10,
          max_retries: 3,
          export_timeout_ms: TIMEOUT,
        },
        routes: [] as unknown as Config['routes'],
      },
      log: createLogger('warn', (l) => lines.push(l)),
      metrics,
      timers: c.timers,
    });
    return metrics;
  };

  it("waits a 503's Retry-After (seconds) before asking again, where its own backoff is shorter", async () => {
    const c = await collector((n) => (n === 1 ? { status: 503, headers: { 'retry-after': '3' } } : { status: 200 }));
    stop = c.close;
    const k = clock();
    start(c.url, k);
    tracing?.webhook(attempt());
    expect(k.next()).toBe(10); // the flush: the export leaves
    await until(answered(k, 1)); // answered: its retry armed
    // The earliest timer is the retry, 3 s on (the backoff alone is 0.5 to 1 s).
    expect(k.next()).toBe(3000);
    await until(() => c.seen() === 2);
  });

  it('waits an HTTP-date Retry-After too, and no longer than a minute', async () => {
    const date = new Date(Date.now() + 3_600_000).toUTCString();
    const c = await collector((n) => (n === 1 ? { status: 429, headers: { 'retry-after': date } } : { status: 200 }));
    stop = c.close;
    const k = clock();
    start(c.url, k);
    tracing?.webhook(attempt());
    k.next();
    await until(answered(k, 1));
    expect(k.next()).toBe(60_000);
    await until(() => c.seen() === 2);
  });

  it('a partial success: the rejected spans are counted as rejected, not exported, and said once', async () => {
    const body = ExportResponse.encode({
      partialSuccess: { rejectedSpans: 1, errorMessage: 'span name too long' },
    }).finish();
    const c = await collector(() => ({ status: 200, body }));
    stop = c.close;
    const k = clock();
    const lines: string[] = [];
    const metrics = start(c.url, k, lines);
    tracing?.webhook(attempt());
    tracing?.webhook(attempt());
    k.next();
    await until(answered(k, 0));
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^wakegate_trace_spans_exported_total 1$/m);
    expect(text).toMatch(/^wakegate_trace_spans_dropped_total\{reason="rejected"\} 1$/m);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('span name too long');
    // OTLP/HTTP exporters name themselves.
    expect(c.agents[0]).toMatch(/^wakegate\//);
  });
});

describe("partialSuccess: reads OTLP's ExportTraceServiceResponse", () => {
  it("reads what the project's own definitions write, and nothing from an empty or broken answer", () => {
    const enc = (o: object) => ExportResponse.encode(o).finish() as Uint8Array;
    expect(partialSuccess(enc({ partialSuccess: { rejectedSpans: 42, errorMessage: 'nope' } }))).toEqual({
      rejected: 42,
      message: 'nope',
    });
    expect(partialSuccess(enc({ partialSuccess: { rejectedSpans: 2 ** 40 } })).rejected).toBe(2 ** 40);
    expect(partialSuccess(enc({}))).toEqual({ rejected: 0, message: '' });
    expect(partialSuccess(new Uint8Array([0x0a, 0x05, 0x08]))).toEqual({ rejected: 0, message: '' });
    expect(partialSuccess(new Uint8Array([0xff, 0xff, 0xff]))).toEqual({ rejected: 0, message: '' });
  });
});
