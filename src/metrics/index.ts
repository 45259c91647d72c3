import { Counter, collectDefaultMetrics, Gauge, Histogram, type Metric, Registry } from 'prom-client';
import { HotCounter, HotHistogram } from './hot.js';

const METHOD_LABELS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'OTHER'];
const METHOD_INDEX = new Map(METHOD_LABELS.slice(0, -1).map((m, i) => [m, i]));
/** Bounded label values: known methods, else OTHER. */
export const methodLabel = (m: string | undefined): string => METHOD_LABELS[methodIndex(m)] as string;
/** methodLabel's position in a fixed list of the 8 labels (for arrays of children). */
export const methodIndex = (m: string | undefined): number =>
  (m === undefined ? undefined : METHOD_INDEX.get(m)) ?? METHOD_LABELS.length - 1;
export const METHOD_COUNT = METHOD_LABELS.length;

const CLASSES = ['1xx', '1xx', '2xx', '3xx', '4xx', '5xx'];
export const statusClass = (s: number): string => CLASSES[Math.floor(s / 100)] ?? 'other';
/** statusClass's position in a fixed list of the 7 labels (1xx for 0-199, 2xx..5xx, other). */
export const statusClassIndex = (s: number): number => {
  const i = Math.floor(s / 100);
  return i >= 0 && i < CLASSES.length ? i : CLASSES.length;
};
export const STATUS_CLASS_COUNT = CLASSES.length + 1;

/** Every instrument of the gateway. Labels stay bounded: route names, methods, status classes, policy names. */
/**
 * `process: false` for an edge thread: the process's own series (CPU, memory, event
 * loop) are the control thread's, and each edge's registry is merged into its scrape.
 */
export function createMetrics(opts: { process?: boolean } = {}) {
  const registry = new Registry();
  if (opts.process !== false) collectDefaultMetrics({ register: registry, prefix: 'wakegate_' });
  // prom-client also exports three gauges named with `_total`, which Prometheus reserves
  // for counters (promtool check metrics refuses them). The same counts stay available,
  // by type, as wakegate_nodejs_active_handles, _requests and _resources.
  for (const what of ['handles', 'requests', 'resources'])
    registry.removeSingleMetric(`wakegate_nodejs_active_${what}_total`);
  // The three instruments every proxied request touches are hot.ts's, registered
  // in the same registry (prom-client's own children cost ~8 us per request).
  const requests = new HotCounter({
    name: 'wakegate_requests_total',
    help: 'Requests served, by route, method and status class',
    labelNames: ['route', 'method', 'status_class'] as const,
  });
  const upstreamLatency = new HotHistogram({
    name: 'wakegate_upstream_latency_seconds',
    help: 'Time from sending a request upstream to the end of its response',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  });
  const overhead = new HotHistogram({
    name: 'wakegate_gateway_overhead_seconds',
    help: 'Time the gateway spends on a request before it goes upstream (routing, key check, rate limit)',
    labelNames: ['route'] as const,
    buckets: [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01],
  });
  for (const m of [requests, upstreamLatency, overhead]) registry.registerMetric(m as unknown as Metric);
  const wakesBuffered = new Gauge({
    name: 'wakegate_wakes_buffered',
    help: 'Wakes waiting in memory to be written',
    registers: [registry],
  });
  const wakesFlushed = new Counter({
    name: 'wakegate_wakes_flushed_total',
    help: 'Wakes written to storage',
    registers: [registry],
  });
  const wakesDropped = new Counter({
    name: 'wakegate_wakes_dropped_total',
    help: 'Wakes dropped, by reason (buffer_full, wal_full, storage_failed)',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const wakesSampledOut = new Counter({
    name: 'wakegate_wakes_sampled_out_total',
    help: 'Refusals of a flood of refused keys past the unauthenticated limit, counted but not stored as wakes',
    registers: [registry],
  });
  // Touched by every exchange past its route's detail limits: hot too.
  const detailsSkipped = new HotCounter({
    name: 'wakegate_wake_details_skipped_total',
    help: "Wakes that kept only their summary, by reason: rate (over their route's capture.detail.max_per_second or max_bytes_per_second) or memory (detail waiting to be written was over its budget)",
    labelNames: ['reason'] as const,
  });
  registry.registerMetric(detailsSkipped as unknown as Metric);
  const flushDuration = new Histogram({
    name: 'wakegate_flush_duration_seconds',
    help: 'Duration of one batched insert of wakes',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const spoolBytes = new Gauge({
    name: 'wakegate_spool_bytes',
    help: 'Bytes of wakes spooled on disk while storage is unavailable',
    registers: [registry],
  });
  const spoolBatches = new Gauge({
    name: 'wakegate_spool_batches',
    help: 'Batches of wakes spooled on disk, waiting to be replayed',
    registers: [registry],
  });
  const storageUp = new Gauge({
    name: 'wakegate_storage_up',
    help: '1 when the last write to storage succeeded, 0 during an outage',
    registers: [registry],
  });
  const keysHeld = new Gauge({ name: 'wakegate_keys', help: 'API keys held in memory', registers: [registry] });
  const rateLimited = new Counter({
    name: 'wakegate_rate_limited_total',
    help: 'Requests refused by a rate limit, by policy',
    labelNames: ['policy'] as const,
    registers: [registry],
  });
  const buckets = new Gauge({
    name: 'wakegate_ratelimit_buckets',
    help: 'Token buckets held in memory',
    registers: [registry],
  });
  const deliveries = new Counter({
    name: 'wakegate_webhook_deliveries_total',
    help: 'Webhook delivery attempts, by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const deliveryLatency = new Histogram({
    name: 'wakegate_webhook_attempt_seconds',
    help: 'Duration of one webhook delivery attempt',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const deliveryQueue = new Gauge({
    name: 'wakegate_webhook_queue_depth',
    help: 'Webhook deliveries pending (waiting for an attempt)',
    registers: [registry],
  });
  const deliveryOldest = new Gauge({
    name: 'wakegate_webhook_oldest_pending_seconds',
    help: 'Age of the oldest pending webhook delivery',
    registers: [registry],
  });
  const eventsDropped = new Counter({
    name: 'wakegate_events_dropped_total',
    help: 'Events not recorded (buffer full, or spool budget exhausted while storage failed), by reason',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const eventsShed = new Counter({
    name: 'wakegate_events_shed_total',
    help: 'Events not turned into deliveries because the event queue was full, by type',
    labelNames: ['type'] as const,
    registers: [registry],
  });
  return {
    registry,
    requests,
    upstreamLatency,
    overhead,
    wakesBuffered,
    wakesFlushed,
    wakesDropped,
    wakesSampledOut,
    detailsSkipped,
    flushDuration,
    spoolBytes,
    spoolBatches,
    storageUp,
    keysHeld,
    rateLimited,
    buckets,
    deliveries,
    deliveryLatency,
    deliveryQueue,
    deliveryOldest,
    eventsShed,
    eventsDropped,
    edgeThreads: new Gauge({
      name: 'wakegate_edge_threads',
      help: 'Edge threads serving the main listener',
      registers: [registry],
    }),
    coordinationUp: new Gauge({
      name: 'wakegate_coordination_up',
      help: 'Whether Redis (coordination.redis_url) answers: 1 yes, 0 no; absent without coordination',
      aggregator: 'min',
      registers: [],
    }),
    coordinationUnavailable: new Counter({
      name: 'wakegate_coordination_unavailable_total',
      help: 'Rate-limit decisions made without Redis (later than coordination.timeout_ms, or down), by outcome: admitted (on_unavailable local within its share, or open) or refused (local past its share, or closed)',
      labelNames: ['outcome'] as const,
      registers: [],
    }),
    coordinationMode: new Gauge({
      name: 'wakegate_coordination_on_unavailable',
      help: 'What decisions do while Redis cannot answer (coordination.on_unavailable): 1 for the configured mode (local, open or closed)',
      labelNames: ['mode'] as const,
      aggregator: 'max',
      registers: [],
    }),
    coordinationInstances: new Gauge({
      name: 'wakegate_coordination_instances',
      help: 'Instances of the fleet (each edge thread counts) alive in the last minute, as last heard from Redis: each bucket is divided by this while Redis cannot answer (on_unavailable local)',
      aggregator: 'max',
      registers: [],
    }),
    coordinationRoundTrips: new Counter({
      name: 'wakegate_coordination_round_trips_total',
      help: 'Calls to Redis, by operation (take, give, quota, publish, lease, fanout, once)',
      labelNames: ['op'] as const,
      registers: [],
    }),
    coordinationRejected: new Counter({
      name: 'wakegate_coordination_rejected_total',
      help: 'Messages on the fleet channels dropped because they failed their check (not from an instance with this storage.encryption_key), by channel',
      labelNames: ['channel'] as const,
      registers: [],
    }),
    traceSpansExported: new Counter({
      name: 'wakegate_trace_spans_exported_total',
      help: 'Spans the OTLP collector (tracing.otlp_url) accepted',
      registers: [],
    }),
    traceSpansDropped: new Counter({
      name: 'wakegate_trace_spans_dropped_total',
      help: 'Spans not exported, by reason: queue_full (tracing.queue_size waiting), export_failed (the collector failed every retry), rejected (it refused them)',
      labelNames: ['reason'] as const,
      registers: [],
    }),
    traceQueued: new Gauge({
      name: 'wakegate_trace_spans_queued',
      help: 'Spans waiting for export',
      registers: [],
    }),
    h2Goaway: new Counter({
      name: 'wakegate_h2_goaway_total',
      help: 'HTTP/2 sessions sent GOAWAY by the gateway, by reason (rapid_reset: a client resetting streams past server.http2_limits.max_resets_per_10s; header_list: a client sending a header list past max_header_list_bytes before acknowledging the SETTINGS, or too often after; drain: a stop)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    edgeRestarts: new Counter({
      name: 'wakegate_edge_restarts_total',
      help: 'Edge threads that died and were started again',
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** Why wakes and events are dropped (the batcher's reasons). */
export const DROP_REASONS = ['buffer_full', 'wal_full', 'storage_failed', 'storage_refused'] as const;
/** What a webhook attempt can end as. */
export const DELIVERY_OUTCOMES = ['delivered', 'failed', 'dead_lettered'] as const;

/**
 * Every known series of the labelled counters, at 0 from the start: a series that
 * appears only at its first event is invisible to `increase()` for that event, so an
 * alert on the first dead-lettered delivery after a start would never fire.
 */
export function primeSeries(m: Metrics, policies: readonly string[]): void {
  for (const r of DROP_REASONS) {
    m.wakesDropped.labels(r).inc(0);
    m.eventsDropped.labels(r).inc(0);
  }
  for (const o of DELIVERY_OUTCOMES) m.deliveries.labels(o).inc(0);
  // `key`: the label of a key's own rate_limit (one label for every such key, never its id).
  for (const p of new Set([...policies, 'unauthenticated', 'key'])) m.rateLimited.labels(p).inc(0);
}

/** The coordination series exist only in a fleet (coordination.redis_url set). */
export function registerCoordination(m: Metrics): void {
  for (const x of [
    m.coordinationUp,
    m.coordinationUnavailable,
    m.coordinationRoundTrips,
    m.coordinationRejected,
    m.coordinationMode,
    m.coordinationInstances,
  ])
    m.registry.registerMetric(x as unknown as Metric);
  for (const o of ['admitted', 'refused']) m.coordinationUnavailable.labels(o).inc(0);
}

/** Why spans are dropped (tracing/exporter.ts). */
export const SPAN_DROP_REASONS = ['queue_full', 'export_failed', 'rejected'] as const;

/** The tracing series exist only with tracing on (tracing.otlp_url set). */
export function registerTracing(m: Metrics): void {
  for (const x of [m.traceSpansExported, m.traceSpansDropped, m.traceQueued])
    m.registry.registerMetric(x as unknown as Metric);
  for (const r of SPAN_DROP_REASONS) m.traceSpansDropped.labels(r).inc(0);
}
