import { z } from 'zod';

/** Names a header may have (RFC 9110 §5.1 token). */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/;

/**
 * OpenTelemetry tracing (docs/tracing.md). With `otlp_url` null nothing is exported
 * and no trace is started, but a request that brings a `traceparent` still keeps its
 * trace and the origin sees the gateway's span as its parent.
 */
export const tracingSchema = z.strictObject({
  /** OTLP/HTTP (protobuf) traces endpoint, e.g. http://collector:4318/v1/traces; null: tracing off. */
  otlp_url: z
    .string()
    .url()
    .refine((u) => /^https?:\/\//.test(u), 'must be an http:// or https:// URL such as http://collector:4318/v1/traces')
    .nullable(),
  /** Head sampling of the traces (0..1), decided from the trace id; a caller's sampled flag is followed (follow_sampled). */
  sample_ratio: z.number().min(0).max(1),
  /**
   * Whose `traceparent` sampled flag (01) has the request's spans exported whatever the
   * ratio: anyone's (always, OpenTelemetry's parent-based sampling), only a client in
   * server.trusted_proxies' (trusted), or no one's (never: the ratio alone decides).
   */
  follow_sampled: z.enum(['always', 'trusted', 'never']),
  /** Requests exported whatever the sampling: those that raised wake.error (5xx) or wake.slow. */
  always_sample: z.array(z.enum(['errors', 'slow'])).max(2),
  /** The resource's service.name. */
  service_name: z.string().min(1).max(256),
  /** Sent with each export (a collector's auth token). */
  headers: z.record(z.string(), z.string().max(8192)).superRefine((h, ctx) => {
    for (const name of Object.keys(h))
      if (!HEADER_NAME.test(name))
        ctx.addIssue({ code: 'custom', path: [name], message: 'is not a header name (such as authorization)' });
  }),
  /** A link from the console to a trace: `{trace_id}` is replaced (e.g. http://jaeger:16686/trace/{trace_id}); null: no link. */
  trace_url: z
    .string()
    .refine((u) => /^https?:\/\/.*\{trace_id\}/.test(u), 'must be an http(s) URL containing {trace_id}')
    .nullable(),
  /** Spans waiting for export at most; past it new ones are dropped (wakegate_trace_spans_dropped_total). */
  queue_size: z.number().int().min(1).max(1_000_000),
  /** Spans per export request at most. */
  batch_size: z.number().int().min(1).max(100_000),
  /** A batch leaves at least this often while spans wait. */
  flush_interval_ms: z.number().int().min(1).max(600_000),
  /** An export request that takes longer is abandoned (and retried). */
  export_timeout_ms: z.number().int().min(1).max(600_000),
  /** A failed export is tried again this many times (backoff doubling from 1 s) before its spans are dropped. */
  max_retries: z.number().int().min(0).max(10),
});

export type TracingConfig = z.infer<typeof tracingSchema>;

export const tracingDefaults: TracingConfig = {
  otlp_url: null,
  sample_ratio: 0.01,
  follow_sampled: 'always',
  always_sample: ['errors', 'slow'],
  service_name: 'wakegate',
  headers: {},
  trace_url: null,
  queue_size: 2048,
  batch_size: 512,
  flush_interval_ms: 1000,
  export_timeout_ms: 10_000,
  max_retries: 3,
};
