import { z } from 'zod';
import { originTlsSchema } from './tls-schema.js';

/** Names a header may have (RFC 9110 §5.1 token). */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/;

/** What a header value may hold (RFC 9110 §5.5 field-value, as the HTTP client checks it): no CR, LF or other control character. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Headers the export request's framing and content type are made of: the exporter
 * sets them, and the HTTP client refuses or the collector misreads one given again.
 */
const EXPORTER_OWN = new Set([
  'content-length',
  'content-type',
  'host',
  'transfer-encoding',
  'connection',
  'expect',
  'keep-alive',
  'upgrade',
]);

/**
 * `tracing.headers`, every name and value checked at start, so a header the HTTP
 * client would refuse fails the config rather than every export. A value is never
 * repeated in a message: it is usually a token.
 */
const headersSchema = z
  .record(
    z.string(),
    // Not z.string(): its type error repeats the value (a bare number in YAML, a token).
    z.custom<string>((v) => typeof v === 'string', 'must be text (quote it in YAML: "123"); the value is not shown'),
  )
  .superRefine((h, ctx) => {
    for (const [name, value] of Object.entries(h)) {
      if (!HEADER_NAME.test(name))
        ctx.addIssue({ code: 'custom', path: [name], message: 'is not a header name (such as authorization)' });
      else if (EXPORTER_OWN.has(name.toLowerCase()))
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message: "is set by the exporter itself (the request's framing and content type); it cannot be configured",
        });
      else if (typeof value !== 'string') continue;
      else if (value.length > 8192)
        ctx.addIssue({ code: 'custom', path: [name], message: 'must be at most 8192 characters long' });
      else if (!HEADER_VALUE.test(value))
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message:
            'holds a character a header value cannot have (a line break, another control character, or one beyond Latin-1); the value is not shown',
        });
    }
  });

/**
 * What is wrong with the credentials (`user:password@`) `otlp_url` carries, or null:
 * an `authorization` in `headers` beside them (two credentials), percent-encoding
 * that does not decode, a colon in the user name. No message repeats the credentials.
 * Checked where the URL's credentials are taken out (below), and again by the loader
 * on what of the config parsed, so it is named with every other problem at once.
 */
export function credentialsProblem(otlpUrl: string, headers: Record<string, unknown>): string | null {
  let u: URL;
  try {
    u = new URL(otlpUrl);
  } catch {
    return null;
  }
  if (u.username === '' && u.password === '') return null;
  if (Object.keys(headers).some((n) => n.toLowerCase() === 'authorization'))
    return "carries credentials (user:password@) and tracing.headers sets authorization too: keep one of them (the URL's are sent as Basic authentication)";
  let user: string;
  try {
    user = decodeURIComponent(u.username);
    decodeURIComponent(u.password);
  } catch {
    return 'its credentials (user:password@) are not valid percent-encoding (write a % as %25)';
  }
  if (user.includes(':'))
    return 'the user name of its credentials (user:password@) holds a colon, which Basic authentication cannot carry';
  return null;
}

/**
 * A `user:password@` in `otlp_url` (which the HTTP client would drop without a word)
 * taken out of the URL and sent as `authorization: Basic …` (RFC 7617), both parts
 * percent-decoded. Refused beside an `authorization` in `headers`: two credentials.
 * No message repeats the credentials.
 */
function credentialsToHeader(t: z.output<typeof tracingObject>, ctx: z.core.$RefinementCtx<unknown>) {
  if (t.otlp_url === null) return t;
  const u = new URL(t.otlp_url);
  if (u.username === '' && u.password === '') return t;
  const problem = credentialsProblem(t.otlp_url, t.headers);
  if (problem !== null) {
    ctx.addIssue({ code: 'custom', path: ['otlp_url'], message: problem });
    return z.NEVER;
  }
  const user = decodeURIComponent(u.username);
  const password = decodeURIComponent(u.password);
  u.username = '';
  u.password = '';
  return {
    ...t,
    otlp_url: u.href,
    headers: { ...t.headers, authorization: `Basic ${Buffer.from(`${user}:${password}`, 'utf8').toString('base64')}` },
  };
}

/** The `tracing` keys as written; tracingSchema is what the gateway runs with. */
const tracingObject = z.strictObject({
  /** OTLP/HTTP (protobuf) traces endpoint, e.g. http://collector:4318/v1/traces; null: tracing off. A user:password@ becomes Basic auth. */
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
  /** Sent with each export (a collector's auth token); the exporter's own (content-type, content-length, host, …) excepted. */
  headers: headersSchema,
  /** How an https:// collector is verified, as a route's origins are (ca, servername); null: the system CAs, the URL's host. */
  tls: originTlsSchema.nullable(),
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

/**
 * OpenTelemetry tracing (docs/tracing.md). With `otlp_url` null nothing is exported
 * and no trace is started, but a request that brings a `traceparent` still keeps its
 * trace and the origin sees the gateway's span as its parent. Once loaded, `otlp_url`
 * carries no credentials: a `user:password@` is in `headers.authorization` (Basic).
 */
export const tracingSchema = tracingObject.transform(credentialsToHeader);

export type TracingConfig = z.infer<typeof tracingSchema>;

export const tracingDefaults: TracingConfig = {
  otlp_url: null,
  sample_ratio: 0.01,
  follow_sampled: 'always',
  always_sample: ['errors', 'slow'],
  service_name: 'wakegate',
  headers: {},
  tls: null,
  trace_url: null,
  queue_size: 2048,
  batch_size: 512,
  flush_interval_ms: 1000,
  export_timeout_ms: 10_000,
  max_retries: 3,
};
