import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Agent } from 'undici';
import type { Config } from '../config/index.js';
import { undici } from '../lazy-require.js';
import type { Logger } from '../log.js';
import { type Metrics, registerTracing } from '../metrics/index.js';
import { connectOptions, originTrust } from '../tls/origin-trust.js';
import { parseRetryAfter } from '../webhooks/backoff.js';
import { HexPool } from './context.js';
import { type Post, realTimers, SpanExporter, type Timers } from './exporter.js';
import { OtlpWriter } from './otlp.js';
import { partialSuccess } from './partial-success.js';
import { type SpanInput, spanSelector, spansOf, type TraceHook } from './span-input.js';
import { wakeSpans } from './spans.js';
import { type WebhookAttempt, webhookSpan } from './webhook-spans.js';

/**
 * Tracing on the control thread: the span inputs of every thread (from the edge
 * threads in batches through the thread protocol, from this thread's own proxy by a
 * direct call) wait in one bounded queue; their spans are written as OTLP protobuf
 * (otlp.ts) when a batch leaves, and exported over OTLP/HTTP. Off
 * (`tracing.otlp_url` null): a part that does nothing, and no hook on the recorder.
 */
export interface Tracing {
  readonly name: 'tracing';
  /** The recorder's hook of this thread's proxy (threads: 1); null when tracing is off. */
  readonly hook: TraceHook | null;
  /** Span inputs an edge thread handed over. */
  add(inputs: SpanInput[]): void;
  /** A webhook attempt's outcome (tracing/webhook-spans.ts tracedSend). */
  webhook(a: WebhookAttempt): void;
  readonly exporter: SpanExporter<Item> | null;
  close(): Promise<void>;
}

type Item = SpanInput | WebhookAttempt;

export interface TracingDeps {
  cfg: Pick<Config, 'tracing' | 'routes'>;
  log: Logger;
  metrics: Metrics;
  /** Tests: their own timers and POST, and a smaller bound on an export request's body (MAX_EXPORT_BYTES). */
  timers?: Timers;
  post?: Post;
  maxExportBytes?: number;
}

const VERSION = (() => {
  try {
    const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8'));
    return String(pkg.version);
  } catch {
    return '';
  }
})();

export function createTracing(d: TracingDeps): Tracing {
  const t = d.cfg.tracing;
  if (t.otlp_url === null) {
    return { name: 'tracing', hook: null, add() {}, webhook() {}, exporter: null, close: async () => {} };
  }
  const { metrics, log } = d;
  registerTracing(metrics);
  const ids = new HexPool();
  const writer = new OtlpWriter({ serviceName: t.service_name, scopeName: 'wakegate', scopeVersion: VERSION });
  const ofWake = wakeSpans(d.cfg, ids);
  // An https:// collector is verified as a route's origins are (tracing.tls: a private CA, a name).
  const connect = { ...connectOptions(originTrust(t.tls, 'tracing.tls')), timeout: t.export_timeout_ms };
  const agent = d.post ? null : new (undici().Agent)({ keepAliveTimeout: 30_000, connections: 2, connect });
  const post = d.post ?? otlpPost(t.otlp_url, t.headers, agent as Agent);
  const warned = oncePerMinute(Date.now);
  // Said in the log without what may authenticate to it (user:password@, a token in the query).
  const collector = (() => {
    const u = new URL(t.otlp_url);
    return `${u.origin}${u.pathname}`;
  })();
  const exporter = new SpanExporter<Item>({
    queueSize: t.queue_size,
    batchSize: t.batch_size,
    flushIntervalMs: t.flush_interval_ms,
    timeoutMs: t.export_timeout_ms,
    maxRetries: t.max_retries,
    count: (i) => (i.kind === 'wake' ? spansOf(i) : 1),
    maxBytes: d.maxExportBytes,
    encode: (items, skip, maxBytes) => {
      writer.start();
      let used = 0;
      for (const i of items) {
        const mark = writer.mark();
        try {
          if (i.kind === 'wake') ofWake(i, writer);
          else webhookSpan(i, writer, ids);
        } catch (e) {
          // Nothing of it stays in the request: its other spans decode as they were.
          writer.rollback(mark);
          skip(i, e instanceof Error ? e : new Error(String(e)));
          used++;
          continue;
        }
        const size = writer.bytes();
        if (size > maxBytes) {
          // Past the bound: it leaves in the next request, or, alone, it never fits one.
          writer.rollback(mark);
          if (!writer.empty()) break;
          skip(i, new Error(`its spans take ${size} bytes, more than an export request may (${maxBytes})`));
        }
        used++;
      }
      return { body: writer.finish(), used };
    },
    reusable: () => writer.recycle(),
    post,
    timers: d.timers ?? realTimers,
    exported: (n) => metrics.traceSpansExported.inc(n),
    dropped: (reason, n) => metrics.traceSpansDropped.labels(reason).inc(n),
    queued: (n) => metrics.traceQueued.set(n),
    // One line a minute at most of each: a collector that is down fails every batch. Apart,
    // so spans the gateway could not write never hide a collector that is down, nor the reverse.
    failed: (why) => {
      if (!warned.due('export')) return;
      log.warn('trace export failed; its spans are dropped (wakegate_trace_spans_dropped_total)', {
        otlp_url: collector,
        why,
      });
    },
    rejected: (n, message) => {
      if (!warned.due('rejected')) return;
      // The collector's own words, cut short: it names what it refused, never our secrets.
      log.warn('the trace collector took an export and rejected part of it (a partial success)', {
        otlp_url: collector,
        rejected_spans: n,
        why: message.slice(0, 300),
      });
    },
    tooLarge: (bytes, bound) => {
      if (!warned.due('too_large')) return;
      log.warn('the trace collector refused an export request as too large (413); smaller ones are sent', {
        otlp_url: collector,
        refused_bytes: bytes,
        max_bytes: bound,
      });
    },
    unwritable: (why) => {
      if (!warned.due('write')) return;
      log.warn('a span could not be written; it is dropped (wakegate_trace_spans_dropped_total)', { why });
    },
  });
  return {
    name: 'tracing',
    hook: spanSelector(d.cfg, (s) => exporter.add(s)),
    add(inputs) {
      for (const s of inputs) exporter.add(s);
    },
    webhook: (a) => exporter.add(a),
    exporter,
    async close() {
      await exporter.close();
      // What the exporter let go of at its deadline is cut, not waited for (a connect that
      // never completes would hold the stop until undici's own connect timeout).
      await agent?.destroy();
    },
  };
}

/** An answer's body read at most (a partial success is a few bytes; the rest is read and let go). */
const ANSWER_BYTES = 64 * 1024;

/**
 * POSTs an export request (OTLP/HTTP, protobuf) with the configured headers. The answer
 * says how long a 429 or 503 asks to wait (Retry-After), and a 2xx whether the collector
 * rejected some of the spans (its partial success).
 */
function otlpPost(url: string, headers: Record<string, string>, agent: Agent): Post {
  // OTLP/HTTP exporters say who they are (a User-Agent of the configured headers wins).
  const named = Object.keys(headers).some((k) => k.toLowerCase() === 'user-agent');
  const h = {
    ...(named ? {} : { 'user-agent': `wakegate/${VERSION || 'dev'}` }),
    ...headers,
    'content-type': 'application/x-protobuf',
  };
  return async (body, signal) => {
    const res = await undici().request(url, { method: 'POST', headers: h, body, signal, dispatcher: agent });
    const status = res.statusCode;
    let ps = { rejected: 0, message: '' };
    if (status >= 200 && status < 300) {
      const chunks: Buffer[] = [];
      let n = 0;
      // Accepted: the answer is read as far as a partial success can be, never further (a
      // collector streaming an endless body kept the export, and the process, reading it).
      // The status is the collector's word: a body cut or still trickling at the export's
      // time leaves the spans accepted, never sent again.
      try {
        for await (const c of res.body as AsyncIterable<Buffer>) {
          chunks.push(c);
          n += c.length;
          if (n > ANSWER_BYTES) break; // leaving the loop destroys the body, and its connection
        }
        if (n > 0 && n <= ANSWER_BYTES)
          ps = answerOf(Buffer.concat(chunks, n), String(res.headers['content-type'] ?? ''));
      } catch {
        res.body.destroy();
      }
    } else await res.body.dump().catch(() => res.body.destroy());
    const ra = res.headers['retry-after'];
    const wait = status === 429 || status === 503 ? parseRetryAfter(Array.isArray(ra) ? ra[0] : ra, Date.now()) : null;
    return { status, retryAfterMs: wait === null ? null : wait * 1000, ...ps };
  };
}

/** A 2xx answer's partial success: protobuf (what a protobuf export is answered in), or JSON from a collector that answers so. */
function answerOf(b: Buffer, type: string): { rejected: number; message: string } {
  if (!type.includes('json')) return partialSuccess(b);
  try {
    const j = JSON.parse(b.toString('utf8')) as {
      partialSuccess?: { rejectedSpans?: unknown; errorMessage?: unknown };
    };
    const n = Number(j.partialSuccess?.rejectedSpans ?? 0);
    const m = j.partialSuccess?.errorMessage;
    return { rejected: Number.isFinite(n) && n > 0 ? n : 0, message: typeof m === 'string' ? m : '' };
  } catch {
    return { rejected: 0, message: '' };
  }
}

/** Whether a line of each kind is due: at most one a minute of each. */
function oncePerMinute(now: () => number) {
  const last = new Map<string, number>();
  return {
    due(kind: string): boolean {
      const t = now();
      const at = last.get(kind);
      if (at !== undefined && t - at < 60_000) return false;
      last.set(kind, t);
      return true;
    },
  };
}
