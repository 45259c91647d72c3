import { z } from 'zod';
import { isAddressOrCidr } from '../proxy/trust.js';
import { listenerTlsSchema, originTlsSchema } from './tls-schema.js';
import { tracingSchema } from './tracing.js';

/** Ports: 0 lets the OS choose (tests); otherwise a real TCP port. */
const port = z.number().int().min(0).max(65535);
const positiveInt = z.number().int().positive();
const nonNegativeInt = z.number().int().min(0);
/** The longest wait a timer can make (2^31 - 1 ms, about 24.8 days): past it Node fires at once. */
export const MAX_TIMER_MS = 2_147_483_647;
const TIMER_LIMIT = `must be at most ${MAX_TIMER_MS} (about 24.8 days: no timer waits longer)`;
/** A wait in milliseconds, a timer's. */
const durationMs = positiveInt.max(MAX_TIMER_MS, TIMER_LIMIT);
const nonNegativeDurationMs = nonNegativeInt.max(MAX_TIMER_MS, TIMER_LIMIT);
const scopeName = z.string().regex(/^[a-z][a-z0-9_.-]*:[a-z][a-z0-9_.-]*$/, 'must look like resource:action');
const httpUrl = z
  .string()
  .url()
  .refine((u) => /^https?:\/\//.test(u), 'must be an http:// or https:// URL');

/**
 * An origin: where a route's requests go. Its user, password, query and fragment would be
 * dropped (a request goes with its own path's query and headers), so they are refused.
 */
const originUrl = httpUrl.superRefine((raw, ctx) => {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return; // Not a URL: httpUrl says so.
  }
  if (u.username || u.password)
    ctx.addIssue({
      code: 'custom',
      message: 'must not hold a user or password (user:password@): the origin would be sent neither',
    });
  if (u.search || u.hash)
    ctx.addIssue({
      code: 'custom',
      message: 'must not hold a query or fragment (?… or #…): each request is sent with its own query',
    });
});

export const windowSchema = z.enum(['second', 'minute', 'hour', 'day']);

export const rateLimitPolicySchema = z.strictObject({
  limit: positiveInt,
  burst: positiveInt,
  window: windowSchema,
  shared: z.boolean().default(false),
});

/** What a wake keeps of the exchange beyond its summary (DESIGN: wake detail). */
export const detailSchema = z.strictObject({
  headers: z.boolean(),
  bodies: z.boolean(),
  max_body_bytes: z.number().int().min(0).max(16_777_216),
  /** Exchanges a second that keep their detail, per route (failed ones counted apart); 0 keeps every one. */
  max_per_second: z.number().int().min(0).max(1_000_000),
  /** Bytes of bodies a second that detail keeps, per route (failed exchanges counted apart); 0: no limit. */
  max_bytes_per_second: z.number().int().min(0).max(1_099_511_627_776),
  /** Bodies the redactor cannot read (XML, base64, binary, GraphQL): `hash` keeps size and SHA-256 only. */
  opaque_bodies: z.enum(['hash', 'keep']),
});

export const routeSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'letters, digits, _ . - only (1-64)'),
  prefix: z.string().startsWith('/', 'must start with /'),
  strip_prefix: z.boolean().default(false),
  /** `mtls`: the client certificate's fingerprint names the key (keys' tls_fingerprint). */
  auth: z.enum(['required', 'optional', 'none', 'mtls']).default('required'),
  scopes: z.strictObject({ read: scopeName, write: scopeName }).nullable().default(null),
  origins: z.record(z.string(), originUrl).refine((o) => Object.keys(o).length > 0, 'needs at least one origin'),
  timeout_ms: durationMs.default(30_000),
  /** Waiting for a free connection to the origin is bounded: past this, 503. */
  queue_timeout_ms: durationMs.default(5_000),
  /** A new connection to the origin (TCP, and TLS for https) must be up within this: past it, 502. */
  connect_timeout_ms: durationMs.default(10_000),
  /** The origin's response header block may be this large; past it 502 naming this setting. */
  max_response_header_bytes: positiveInt.max(1_048_576).default(16_384),
  latency_objective_ms: durationMs.nullable().default(null),
  availability_objective: z.number().gt(0).lt(1).nullable().default(null),
  rate_limit: z.string().default('default'),
  /** Protocols an Upgrade may switch this route's connections to (RFC 9110 §7.8 tokens, compared in lower case). */
  upgrades: z
    .array(
      z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~/-]{1,64}$/, 'must be an upgrade protocol token such as websocket'),
    )
    .max(16)
    .default(['websocket']),
  /** Narrows or widens `capture.detail` for this route. */
  capture: z.strictObject({ detail: detailSchema.partial().default({}) }).default({ detail: {} }),
  /** Trust for this route's https:// origins (default: the system CAs, the origin's host name). */
  tls: originTlsSchema.nullable().optional(),
});

export const environmentSchema = z.strictObject({
  class: z.enum(['live', 'test']),
  wake_retention_days: positiveInt.max(3650).default(30),
});

/** Per HTTP/2 session: streams open at once, a request's header list, client stream resets per 10 s (then GOAWAY). */
const http2LimitsSchema = z.strictObject({
  max_concurrent_streams: positiveInt.max(1000),
  max_header_list_bytes: positiveInt.min(1024).max(1_048_576),
  max_resets_per_10s: positiveInt,
});

export const configSchema = z.strictObject({
  server: z
    .strictObject({
      port,
      host: z.string().min(1),
      ops_port: port,
      ops_host: z.string().min(1),
      region: z.string().min(1).max(64),
      /** Edge threads serving the main listener: auto (one per core) or a number. */
      threads: z.union([z.literal('auto'), positiveInt.max(1024)]),
      /** Slowloris guard: the whole header block must arrive within this time. */
      headers_timeout_ms: durationMs,
      /** The whole request (headers and body) must arrive within this time; 0 disables. */
      request_timeout_ms: nonNegativeDurationMs,
      keep_alive_timeout_ms: durationMs,
      /** Larger request header blocks get 431. */
      max_header_bytes: positiveInt,
      /** Body limit of /v2 management calls; larger ones get 413. */
      api_body_limit_bytes: positiveInt,
      /** A /v2 body on the main listener must arrive whole within this time after its headers; past it 408. */
      api_body_timeout_ms: durationMs,
      /** Upper bound on open client connections. */
      max_connections: positiveInt,
      /** A stop's grace period for requests in flight; null: the longest route timeout_ms plus 5 s. */
      drain_timeout_ms: durationMs.nullable(),
      /** A WebSocket (or other upgraded) tunnel with no traffic either way for this long is closed. */
      tunnel_idle_timeout_ms: durationMs,
      /** Open tunnels (and upgrade handshakes) at most, in all and per client address; past them 503. */
      max_tunnels: positiveInt,
      max_tunnels_per_client: positiveInt,
      /** Request bodies up to this are read before the request takes an origin connection; larger ones stream. */
      buffer_request_body_bytes: nonNegativeInt.max(67_108_864),
      /** Request body bytes held in memory at once, all requests together; past it 503. */
      max_buffered_request_bytes: positiveInt,
      /** Bodies past that streaming at once from one client address; past it 503. */
      max_streaming_uploads_per_client: positiveInt,
      /** Connections to each origin at most. */
      upstream_connections: positiveInt.max(65_536),
      /** Responses up to this are read from the origin at its speed (its connection freed), whatever the client's. */
      buffer_response_body_bytes: nonNegativeInt.max(67_108_864),
      /** Answer bytes held that way for slow clients, all answers together; past it origins are paused instead. */
      max_buffered_response_bytes: positiveInt,
      /** Responses past that streaming at once to one client address; past it an answer falling behind is cut off. */
      max_streaming_downloads_per_client: positiveInt,
      /** A client that reads nothing of its response for this long is cut off. */
      send_timeout_ms: durationMs,
      /** Proxies whose X-Forwarded-* / Forwarded values are kept and appended to (addresses or CIDR blocks). */
      trusted_proxies: z.array(
        z.string().refine(isAddressOrCidr, 'must be an IP address or CIDR block such as 10.0.0.0/8'),
      ),
      /** HTTP/2: true offers h2 by ALPN on TLS; 'h2c' also serves prior-knowledge h2 on the plain listener. */
      http2: z.union([z.boolean(), z.literal('h2c')]),
      http2_limits: http2LimitsSchema,
      /** TLS on the main listener; null: plain HTTP. */
      tls: listenerTlsSchema.nullable(),
      /** TLS on the ops listener (metrics, health, and the console and /v2 when they share it); null: plain HTTP. */
      ops_tls: listenerTlsSchema.nullable(),
    })
    .superRefine((s, ctx) => {
      // The header block is part of the request: Node refuses a header timeout longer than the request's.
      if (s.request_timeout_ms > 0 && s.headers_timeout_ms > s.request_timeout_ms)
        ctx.addIssue({
          code: 'custom',
          path: ['headers_timeout_ms'],
          message: `must be at most server.request_timeout_ms (${s.request_timeout_ms}), or set request_timeout_ms to 0`,
        });
    }),
  storage: z.strictObject({
    data_dir: z.string().min(1),
    clickhouse_url: httpUrl.nullable(),
    clickhouse_user: z.string().nullable(),
    clickhouse_password: z.string().nullable(),
    clickhouse_database: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a plain identifier'),
    cluster: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a plain identifier')
      .nullable(),
    /** Disk budget of each write-ahead log (wakes, events, deliveries), backlog included. */
    spool_max_bytes: positiveInt,
    /** How often the key mirror asks the store for key changes. */
    key_poll_interval_ms: durationMs,
    /** Base64 of 32 bytes sealing stored signing secrets (WAKEGATE_ENCRYPTION_KEY); null: DATA_DIR/secret.key. */
    encryption_key: z
      .string()
      .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be base64 of exactly 32 bytes')
      .nullable(),
  }),
  environments: z
    .record(
      z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/, 'environment names are lower-case identifiers'),
      environmentSchema,
    )
    .refine((e) => Object.keys(e).length > 0, 'at least one environment is needed'),
  capture: z.strictObject({
    batch_rows: positiveInt.max(1_000_000),
    flush_interval_ms: durationMs,
    max_buffered_rows: positiveInt,
    /** Batches written at once while storage answers (one per core is a good start). */
    max_inflight_batches: positiveInt.max(16),
    detail: detailSchema,
    /** Header values replaced by a redaction marker before anything is stored. */
    redact_headers: z.array(z.string().min(1).max(128)),
    /** JSON fields (at any depth), form fields and query parameters replaced by a marker. */
    redact_fields: z.array(z.string().min(1).max(128)),
    /** Detail (headers and bodies) held in memory waiting to be written; past it, wakes keep only their summary. */
    detail_max_buffered_bytes: positiveInt,
  }),
  routes: z.array(routeSchema),
  // A policy's name is written into answers' RateLimit-Policy and RateLimit headers, quoted.
  rate_limits: z.record(
    z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'a policy name is letters, digits, _ . - only (1-64)'),
    rateLimitPolicySchema,
  ),
  webhooks: z.strictObject({
    timeout_ms: durationMs,
    retry_schedule_s: z.array(nonNegativeInt).max(20),
    jitter: z.number().min(0).max(1),
    allow_insecure_http: z.boolean(),
    allow_private_networks: z.boolean(),
    disable_after_410_days: positiveInt,
    max_concurrency: positiveInt,
    max_per_endpoint: positiveInt,
    max_queued_events: positiveInt,
    dead_letter_retention_days: positiveInt,
  }),
  /** Several gateways as one fleet: buckets, revocations and webhook dispatch shared through Redis or Valkey. */
  coordination: z.strictObject({
    redis_url: z
      .string()
      .regex(/^rediss?:\/\/[^\s]+$/, 'must be a redis:// or rediss:// URL such as redis://127.0.0.1:6379/0')
      .nullable(),
    /** Begins every Redis key and channel name the fleet uses: several fleets can share one Redis. */
    prefix: z
      .string()
      .regex(/^[A-Za-z0-9_.:{}-]{1,64}$/, 'must be 1 to 64 letters, digits or _ . : - { } such as "wakegate:"'),
    /** A bucket decision waits at most this for Redis. */
    timeout_ms: durationMs.max(10_000),
    /**
     * While Redis cannot answer: enforce each bucket at this instance's share (local: the
     * bucket divided by the instances alive in the last minute), admit (open) or refuse with 503 (closed).
     */
    on_unavailable: z.enum(['local', 'open', 'closed']),
  }),
  ratelimit: z.strictObject({
    /**
     * Most token buckets held at once; past it the oldest are folded into a fixed-size
     * sketch. At least one probe window (16 slots, a lookup's bound); at most 16,777,216
     * (64 bytes each: 1 GiB of shared memory).
     */
    max_buckets: z
      .number()
      .int()
      .min(16, 'must be at least 16 (a lookup probes a window of 16 slots)')
      .max(16_777_216, 'must be at most 16777216 (64 bytes a bucket: 1 GiB)'),
    /** Cells of that sketch (each 8 bytes); the quota sketch beside it takes as many bytes. */
    sketch_cells: positiveInt.max(16_777_216),
  }),
  /** The write-ahead log of wakes, events and delivery outcomes (DATA_DIR/wal). */
  wal: z.strictObject({
    /** Finished rows reach the log within this (one write per interval). */
    sync_interval_ms: durationMs.max(1000),
    /** The log is fsynced this often: what a power loss can lose. */
    fsync_interval_ms: durationMs.max(60_000),
  }),
  /**
   * Where management is served: the console and /v2 on a listener that proxies nothing
   * (the ops listener, or one of its own), and /v2 also on the main listener unless
   * `on_main: false` (then an origin that serves /v2/… itself gets every path).
   */
  management: z.strictObject({
    listener: z.enum(['ops', 'separate']),
    host: z.string().min(1),
    port,
    on_main: z.boolean(),
    /** TLS on the separate management listener (listener: separate); null: plain HTTP. */
    tls: listenerTlsSchema.nullable(),
  }),
  /** The web console, on the management listener (never on the main one, whose pages are the apps'). */
  console: z.strictObject({
    enabled: z.boolean(),
    path: z
      .string()
      .regex(/^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/, 'must be a path such as /console (no trailing slash)'),
  }),
  log: z.strictObject({
    level: z.enum(['debug', 'info', 'warn', 'error', 'silent']),
    /** One JSON line per request on stdout. */
    access: z.boolean(),
  }),
  /** OpenTelemetry: W3C Trace Context on every request, spans exported over OTLP/HTTP (config/tracing.ts). */
  tracing: tracingSchema,
  /** Secret of the bootstrap admin key (WAKEGATE_ADMIN_KEY). Never logged. */
  admin_key: z.string().nullable(),
});

export type Config = z.infer<typeof configSchema>;
export type RouteConfig = z.infer<typeof routeSchema>;
export type RateLimitPolicy = z.infer<typeof rateLimitPolicySchema>;
export type EnvironmentConfig = z.infer<typeof environmentSchema>;
export type RateWindow = z.infer<typeof windowSchema>;
