import { describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/index.js';
import { tracingDefaults } from '../../src/config/tracing.js';
import { createLogger, silentLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import { type Post, realTimers, SpanExporter, type Timers } from '../../src/tracing/exporter.js';
import { createTracing } from '../../src/tracing/index.js';
import { OtlpWriter, SERVER } from '../../src/tracing/otlp.js';
import type { WebhookAttempt } from '../../src/tracing/webhook-spans.js';
import { decodeSpans } from '../helpers/otlp-receiver.js';

/** Timers run by hand: `advance(ms)` fires what falls due, in order. */
function fakeTimers() {
  let now = 0;
  let seq = 0;
  const due = new Map<number, { at: number; fn: () => void }>();
  const timers: Timers = {
    setTimeout(fn, ms) {
      const id = ++seq;
      due.set(id, { at: now + ms, fn });
      return id;
    },
    clearTimeout(h) {
      due.delete(h as number);
    },
  };
  const advance = async (ms: number) => {
    const until = now + ms;
    for (;;) {
      // What the last step started (a POST's answer) settles first.
      await new Promise((r) => setImmediate(r));
      const next = [...due.entries()].sort((a, b) => a[1].at - b[1].at)[0];
      if (next === undefined || next[1].at > until) break;
      due.delete(next[0]);
      now = next[1].at;
      next[1].fn();
      await new Promise((r) => setImmediate(r));
    }
    now = until;
  };
  return { timers, advance, pending: () => [...due.values()].map((d) => d.at - now) };
}

const writer = new OtlpWriter({ serviceName: 'svc', scopeName: 'wakegate', scopeVersion: '1' });
const encode = (items: number[]): Uint8Array => {
  writer.start();
  for (const i of items) {
    writer.begin({
      name: `s${i}`,
      kind: SERVER,
      traceId: 'ab'.repeat(16),
      spanId: String(i).padStart(16, '0'),
      parentSpanId: '',
      remoteParent: false,
      startMs: 1_700_000_000_000,
      endMs: 1_700_000_000_001,
    });
    writer.end('');
  }
  return writer.finish();
};

function exporter(o: {
  answers: number[];
  queueSize?: number;
  batchSize?: number;
  maxRetries?: number;
  /** The writer given its buffer back after each export answered 2xx (as the gateway does). */
  recycle?: boolean;
  /** The backoff's spread (1: the whole of each wait, as the timings below expect). */
  random?: () => number;
}) {
  const t = fakeTimers();
  const counts = { exported: 0, queue_full: 0, export_failed: 0, rejected: 0 };
  const bodies: Uint8Array[] = [];
  /** Each body's span names as it was posted (a recycled body is written over later). */
  const posted: string[][] = [];
  const answers = [...o.answers];
  const e = new SpanExporter<number>({
    queueSize: o.queueSize ?? 100,
    batchSize: o.batchSize ?? 10,
    flushIntervalMs: 100,
    timeoutMs: 1000,
    maxRetries: o.maxRetries ?? 2,
    random: o.random ?? (() => 1),
    count: () => 1,
    encode,
    ...(o.recycle ? { reusable: () => writer.recycle() } : {}),
    post: async (body) => {
      bodies.push(body);
      posted.push(decodeSpans(body).map((s) => s.name));
      const a = answers.shift() ?? 200;
      if (a === 0) throw Object.assign(new Error('refused'), { code: 'ECONNREFUSED' });
      return a;
    },
    timers: t.timers,
    exported: (n) => {
      counts.exported += n;
    },
    dropped: (reason, n) => {
      counts[reason] += n;
    },
    queued: () => {},
    failed: () => {},
    unwritable: () => {},
  });
  return { e, t, counts, bodies, posted };
}

describe('SpanExporter', () => {
  it('sends a batch after the flush interval, encoded as OTLP protobuf', async () => {
    const { e, t, counts, bodies } = exporter({ answers: [] });
    for (let i = 0; i < 3; i++) e.add(i);
    expect(bodies).toHaveLength(0);
    await t.advance(100);
    expect(bodies).toHaveLength(1);
    expect(decodeSpans(bodies[0] as Uint8Array).map((s) => s.name)).toEqual(['s0', 's1', 's2']);
    expect(counts.exported).toBe(3);
  });

  it('sends as soon as a batch is full (on a turn of its own), one request at a time', async () => {
    const { e, t, bodies } = exporter({ answers: [], batchSize: 2 });
    for (let i = 0; i < 5; i++) e.add(i);
    // Not on the turn of the add that filled it.
    expect(bodies).toHaveLength(0);
    expect(t.pending()).toEqual([0]);
    await t.advance(0);
    expect(bodies.length).toBeGreaterThanOrEqual(1);
    await t.advance(0);
    expect(bodies.length).toBeGreaterThanOrEqual(2);
    await t.advance(100);
    expect(bodies.map((b) => decodeSpans(b).length)).toEqual([2, 2, 1]);
  });

  it('retries a failed export with backoff (1 s, 2 s), then drops it, counted', async () => {
    const { e, t, counts, bodies } = exporter({ answers: [503, 0, 503], maxRetries: 2 });
    e.add(1);
    await t.advance(100);
    expect(bodies).toHaveLength(1);
    await t.advance(999);
    expect(bodies).toHaveLength(1);
    await t.advance(1);
    expect(bodies).toHaveLength(2);
    await t.advance(2000);
    expect(bodies).toHaveLength(3);
    expect(counts).toMatchObject({ exported: 0, export_failed: 1 });
    // The same bytes each time.
    expect(bodies[2]).toEqual(bodies[0]);
  });

  it('never writes over a body whose export got no answer (refused, or timed out)', async () => {
    const { e, t, bodies, posted } = exporter({ answers: [0, 200], maxRetries: 0, recycle: true });
    e.add(1);
    await t.advance(100); // no answer: dropped, not retried
    e.add(2);
    await t.advance(100);
    const [a, b] = bodies as [Uint8Array, Uint8Array];
    expect(a.buffer === b.buffer && a.byteOffset === b.byteOffset).toBe(false);
    expect(posted).toEqual([['s1'], ['s2']]);
  });

  it('writes the next batch over a body the collector took (2xx), never over one it failed or may still read', async () => {
    const { e, t, bodies, posted } = exporter({ answers: [200, 503, 200, 400, 200], maxRetries: 1, recycle: true });
    const batch = async (from: number) => {
      for (let i = from; i < from + 3; i++) e.add(i);
      await t.advance(100);
    };
    // Where a body's bytes are (small buffers share Node's pool: the offset tells them apart).
    const memory = (i: number) => `${(bodies[i] as Uint8Array).byteOffset}`;
    const pool = (i: number) => (bodies[i] as Uint8Array).buffer;
    await batch(0); // 200
    await batch(10); // 503: kept for its retry
    expect(memory(1)).toBe(memory(0));
    expect(pool(1)).toBe(pool(0));
    await t.advance(1000); // the retry: the same bytes, intact
    expect(posted[2]).toEqual(posted[1]);
    expect(Buffer.from(bodies[2] as Uint8Array)).toEqual(Buffer.from(bodies[1] as Uint8Array));
    await batch(20); // 400: refused, so perhaps not all read
    expect(memory(3)).toBe(memory(2));
    await batch(30); // 200, in memory of its own
    expect(pool(4) === pool(3) && memory(4) === memory(3)).toBe(false);
    expect(posted).toEqual([
      ['s0', 's1', 's2'],
      ['s10', 's11', 's12'],
      ['s10', 's11', 's12'],
      ['s20', 's21', 's22'],
      ['s30', 's31', 's32'],
    ]);
  });

  it('spreads each backoff over its last half, so exporters that failed together come back apart', async () => {
    const { e, t, bodies } = exporter({ answers: [503, 503], random: () => 0 });
    e.add(1);
    await t.advance(100);
    await t.advance(499);
    expect(bodies).toHaveLength(1);
    await t.advance(1);
    expect(bodies).toHaveLength(2); // 0.5 s, not 1 s
    await t.advance(1000);
    expect(bodies).toHaveLength(3); // 1 s, not 2 s
  });

  it('does not retry a refusal (400): rejected', async () => {
    const { e, t, counts, bodies } = exporter({ answers: [400] });
    e.add(1);
    await t.advance(5000);
    expect(bodies).toHaveLength(1);
    expect(counts.rejected).toBe(1);
  });

  it('bounds what waits: past queueSize new spans are dropped as queue_full', async () => {
    const { e, t, counts } = exporter({ answers: [503, 503, 503], queueSize: 5, batchSize: 100, maxRetries: 2 });
    for (let i = 0; i < 5; i++) e.add(i);
    await t.advance(100); // in flight, then waiting for its retry
    for (let i = 0; i < 20; i++) e.add(i);
    expect(e.queuedSpans).toBe(5);
    expect(counts.queue_full).toBe(15);
    // The stop: the batch waiting for its retry, and the one last try of what waits (refused again).
    await e.close();
    expect(counts.export_failed).toBe(10);
  });
});

describe('a stop while an export is in flight', () => {
  const counting = (post: Post) => {
    const counts = { exported: 0, queue_full: 0, export_failed: 0, rejected: 0 };
    const e = new SpanExporter<number>({
      queueSize: 100,
      batchSize: 5,
      flushIntervalMs: 10,
      timeoutMs: 10_000,
      maxRetries: 3,
      count: () => 1,
      encode: (items) => new Uint8Array(items.length),
      post,
      timers: realTimers,
      exported: (n) => {
        counts.exported += n;
      },
      dropped: (reason, n) => {
        counts[reason] += n;
      },
      queued: () => {},
      failed: () => {},
      unwritable: () => {},
    });
    return { e, counts };
  };
  /** A collector answering `status` after `ms` (unless the exporter gives up first). */
  const answering =
    (ms: number, status = 200, posts = { n: 0 }): Post =>
    (_body, signal) =>
      new Promise<number>((resolve, reject) => {
        posts.n++;
        const t = setTimeout(() => resolve(status), ms);
        signal.addEventListener('abort', () => {
          clearTimeout(t);
          reject(signal.reason);
        });
      });

  it('lets a collector that answers in time take it, then sends what waits', async () => {
    const posts = { n: 0 };
    const { e, counts } = counting(answering(50, 200, posts));
    for (let i = 0; i < 8; i++) e.add(i); // a full batch of 5 leaves at once, 3 wait
    for (let i = 0; i < 100 && posts.n === 0; i++) await new Promise((r) => setTimeout(r, 2));
    expect(posts.n).toBe(1);
    await e.close();
    expect(posts.n).toBe(2);
    expect(counts).toEqual({ exported: 8, queue_full: 0, export_failed: 0, rejected: 0 });
  });

  it('abandons one the collector does not answer within the stop, and sends nothing more to it', async () => {
    const posts = { n: 0 };
    const { e, counts } = counting(answering(60_000, 200, posts));
    for (let i = 0; i < 8; i++) e.add(i);
    for (let i = 0; i < 100 && posts.n === 0; i++) await new Promise((r) => setTimeout(r, 2));
    const t0 = performance.now();
    await e.close();
    // The stop's 2 s, not the export's 10 s timeout nor the collector's minute.
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(posts.n).toBe(1);
    expect(counts).toEqual({ exported: 0, queue_full: 0, export_failed: 8, rejected: 0 });
  });
});

describe("the gateway's export batches (createTracing)", () => {
  it('a span input that fails part-way through its writing is left out whole, counted; its batch leaves', async () => {
    const t = fakeTimers();
    const bodies: Uint8Array[] = [];
    const metrics = createMetrics({ process: false });
    const tracing = createTracing({
      cfg: {
        tracing: { ...tracingDefaults, otlp_url: 'http://127.0.0.1:9/v1/traces', flush_interval_ms: 100 },
        routes: [] as unknown as Config['routes'],
      },
      log: silentLogger,
      metrics,
      timers: t.timers,
      post: async (body) => {
        bodies.push(Uint8Array.prototype.slice.call(body));
        return 200;
      },
    });
    const attempt = (url: string): WebhookAttempt => ({
      kind: 'webhook',
      deliveryId: `del_${url.length}`,
      eventType: 'wake.error',
      attempt: 1,
      url,
      payload: '{}',
      startMs: 1_700_000_000_000,
      durationMs: 5,
      status: 200,
      error: null,
    });
    tracing.webhook(attempt('http://127.0.0.1:8080/a'));
    // Its span is begun and its first attributes written before the URL is read, which throws.
    tracing.webhook(attempt('http://[not a url/'));
    tracing.webhook(attempt('http://127.0.0.1:8080/abc'));
    await t.advance(100);
    expect(bodies).toHaveLength(1);
    const spans = decodeSpans(bodies[0] as Uint8Array);
    // A receiver's path is not exported (it is often its secret): the two told apart by their delivery ids.
    expect(spans.map((s) => s.attributes['url.full'])).toEqual(['http://127.0.0.1:8080/…', 'http://127.0.0.1:8080/…']);
    expect(spans.map((s) => s.attributes['wakegate.delivery_id'])).toEqual(['del_23', 'del_25']);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/wakegate_trace_spans_dropped_total\{reason="export_failed"\} 1/);
    expect(text).toMatch(/wakegate_trace_spans_exported_total 2/);
    await tracing.close();
  });

  it('says a span it could not write apart from a collector that is down, so neither hides the other', async () => {
    const t = fakeTimers();
    const lines: string[] = [];
    let answer = 200;
    let posts = 0;
    const tracing = createTracing({
      cfg: {
        tracing: {
          ...tracingDefaults,
          otlp_url: 'http://127.0.0.1:9/v1/traces',
          flush_interval_ms: 100,
          max_retries: 0,
        },
        routes: [] as unknown as Config['routes'],
      },
      log: createLogger('warn', (l) => lines.push(l)),
      metrics: createMetrics({ process: false }),
      timers: t.timers,
      post: async () => {
        posts++;
        return answer;
      },
    });
    const attempt = (url: string): WebhookAttempt => ({
      kind: 'webhook',
      deliveryId: 'del_1',
      eventType: 'wake.error',
      attempt: 1,
      url,
      payload: '{}',
      startMs: 1_700_000_000_000,
      durationMs: 5,
      status: 200,
      error: null,
    });
    tracing.webhook(attempt('http://[not a url/'));
    await t.advance(100);
    // Nothing of that batch could be written: no empty export request is sent.
    expect(posts).toBe(0);
    // The collector goes down within the minute: its line is still said.
    answer = 503;
    tracing.webhook(attempt('http://127.0.0.1:8080/a'));
    await t.advance(100);
    expect(lines.filter((l) => l.includes('a span could not be written'))).toHaveLength(1);
    const down = lines.filter((l) => l.includes('trace export failed'));
    expect(down).toHaveLength(1);
    expect(down[0]).toContain('127.0.0.1:9/v1/traces');
    // Each is said once a minute at most.
    tracing.webhook(attempt('http://[not a url/'));
    tracing.webhook(attempt('http://127.0.0.1:8080/b'));
    await t.advance(100);
    expect(lines).toHaveLength(2);
    await tracing.close();
  });
});
