import type { Column, TableSpec } from './ddl.js';

/**
 * Every table, described once: today's columns, engine, keys and settings, with
 * the migration that added a column or setting later (`since`) or dropped an index
 * (`until`). A single server's migrations and a cluster's schema are both made from
 * these (ddl.ts), so the two cannot drift apart. Tables that hold mutable records
 * use ReplacingMergeTree keyed by id and versioned by `updated_at`, read with FINAL.
 */

/** How long events (the source of webhook deliveries) are kept. */
export const EVENT_RETENTION_DAYS = 30;

const TIME = "DateTime64(3, 'UTC')";
const NULLABLE_TIME = `Nullable(${TIME})`;
const LOW = 'LowCardinality(String)';
const col = (name: string, type: string, more: Omit<Column, 'name' | 'type'> = {}): Column => ({ name, type, ...more });
const DEDUP = { name: 'non_replicated_deduplication_window', value: 10_000 } as const;

export const WAKES: TableSpec = {
  name: 'wakes',
  columns: [
    col('id', 'String'),
    col('environment', LOW),
    col('captured_at', TIME),
    col('method', LOW),
    col('path', 'String'),
    col('route', LOW),
    col('status', 'UInt16'),
    col('latency_ms', 'UInt32'),
    col('consumer', 'String'),
    col('key_id', 'String'),
    col('region', LOW),
    col('request_bytes', 'UInt64'),
    col('response_bytes', 'UInt64'),
    col('client_ip', 'String'),
    col('user_agent', 'String'),
    col('retention_days', 'UInt16'),
    // Stored paths are capped at 2 KB; the wake says when its path was cut.
    col('path_truncated', 'UInt8', { default: '0', since: 6 }),
    // A replay's wake names the original.
    col('replay_of', 'String', { default: "''", since: 9 }),
    // The client's protocol, its certificate (mTLS), and the request's W3C trace context.
    col('protocol', LOW, { default: "'http/1.1'", since: 16 }),
    col('tls_subject', 'String', { default: "''", since: 16 }),
    col('tls_fingerprint', 'String', { default: "''", since: 16 }),
    col('trace_id', 'String', { default: "''", since: 16 }),
    col('span_id', 'String', { default: "''", since: 16 }),
  ],
  indexes: [
    { name: 'idx_status', expr: 'status', type: 'minmax', granularity: 4 },
    { name: 'idx_latency', expr: 'latency_ms', type: 'minmax', granularity: 4 },
    { name: 'idx_key', expr: 'key_id', type: 'bloom_filter', granularity: 4 },
    { name: 'idx_consumer', expr: 'consumer', type: 'bloom_filter', granularity: 4 },
    // GET /v2/wakes?trace_id= reads only the granules that may hold the trace.
    { name: 'idx_trace', expr: 'trace_id', type: 'bloom_filter', granularity: 4, since: 16 },
    // Cost about a third of the CPU of every insert and merge (bench/RESULTS.md) and
    // cannot serve the anchored regex a path template becomes: dropped by migration 5.
    { name: 'idx_path', expr: 'path', type: 'ngrambf_v1(3, 4096, 2, 0)', granularity: 4, until: 5 },
  ],
  engine: 'MergeTree',
  partitionBy: 'toDate(captured_at)',
  orderBy: '(environment, captured_at, id)',
  ttl: 'toDateTime(captured_at) + toIntervalDay(retention_days)',
  settings: [DEDUP],
  shardKey: 'cityHash64(id)',
};

/** The exchange a wake keeps (redacted), read only by GET /v2/wakes/{id}, with the wake's retention. */
export const WAKE_DETAILS: TableSpec = {
  name: 'wake_details',
  columns: [
    col('id', 'String'),
    col('environment', LOW),
    col('captured_at', TIME),
    col('query', 'String', { codec: 'LZ4' }),
    col('request_headers', 'String', { codec: 'LZ4' }),
    col('response_headers', 'String', { codec: 'LZ4' }),
    col('request_body', 'String', { codec: 'LZ4' }),
    col('request_body_bytes', 'UInt64'),
    col('request_body_state', 'Int8'),
    col('request_body_encoding', LOW),
    col('response_body', 'String', { codec: 'LZ4' }),
    col('response_body_bytes', 'UInt64'),
    col('response_body_state', 'Int8'),
    col('response_body_encoding', LOW),
    col('diff', 'String', { codec: 'LZ4' }),
    col('retention_days', 'UInt16'),
  ],
  engine: 'MergeTree',
  partitionBy: 'toDate(captured_at)',
  orderBy: '(environment, captured_at, id)',
  ttl: 'toDateTime(captured_at) + toIntervalDay(retention_days)',
  settings: [
    // A granule of detail holds at most 1 MB (the engine's default is 10 MB, and 8,192
    // rows); it cannot be altered, so migration 12 remade the table (detail-table.ts).
    { name: 'index_granularity_bytes', value: 1_048_576, since: 12 },
    DEDUP,
    // Parts up to 1 GiB are compact: a few files each, not two a column (migration 14).
    { name: 'min_bytes_for_wide_part', value: 1_073_741_824, since: 14 },
    // Wide rows merged a column at a time: lower peak memory at the same CPU (migration 10).
    { name: 'vertical_merge_algorithm_min_rows_to_activate', value: 1, since: 10 },
    { name: 'vertical_merge_algorithm_min_columns_to_activate', value: 1, since: 10 },
    // Read a wake at a time, never scanned: more parts, fewer merges (migration 11).
    { name: 'merge_selector_base', value: 20, since: 11, tuning: true },
  ],
  shardKey: 'cityHash64(id)',
};

export const API_KEYS: TableSpec = {
  name: 'api_keys',
  columns: [
    col('id', 'String'),
    col('environment', LOW),
    col('label', 'String'),
    col('consumer', 'String'),
    col('scopes', 'Array(String)'),
    col('rate_limit', 'String'),
    col('replaces', 'String'),
    col('secret_hash', 'String'),
    col('created_at', TIME),
    col('revoke_at', NULLABLE_TIME),
    col('revoked_at', NULLABLE_TIME),
    col('updated_at', TIME),
    // Marks the bootstrap admin key (one at a time).
    col('bootstrap', 'UInt8', { default: '0', since: 15 }),
    // The SHA-256 fingerprint of the client certificate that names this key (auth: mtls); '' for none.
    col('tls_fingerprint', 'String', { default: "''", since: 17 }),
    // A key made with `replaces`: the first key of its chain, whose rate-limit bucket it spends from; '' for its own.
    col('bucket', 'String', { default: "''", since: 18 }),
  ],
  engine: 'ReplacingMergeTree',
  version: 'updated_at',
  orderBy: 'id',
  shardKey: 'cityHash64(id)',
};

/**
 * Every revocation written, never replaced: api_keys keeps a key's newest version, and a
 * version another instance wrote from an older read (its certificate set, a revocation
 * scheduled) would otherwise replace a revocation. A key read from storage takes the
 * earliest revoke_at and revoked_at of its rows here (revocation only moves earlier).
 */
export const KEY_REVOCATIONS: TableSpec = {
  name: 'key_revocations',
  columns: [
    col('id', 'String'),
    col('revoke_at', NULLABLE_TIME),
    col('revoked_at', NULLABLE_TIME),
    // The updated_at of the key version that carried it.
    col('written_at', TIME),
  ],
  engine: 'MergeTree',
  orderBy: 'id',
  shardKey: 'cityHash64(id)',
};

export const KEY_USAGE: TableSpec = {
  name: 'key_usage',
  columns: [col('key_id', 'String'), col('last_used_at', TIME)],
  engine: 'ReplacingMergeTree',
  version: 'last_used_at',
  orderBy: 'key_id',
  shardKey: 'cityHash64(key_id)',
};

/** Sorted by recording order, which the fan-out polls by (migration 7 remade it so). */
export const EVENTS: TableSpec = {
  name: 'events',
  columns: [
    col('id', 'String'),
    col('environment', LOW),
    col('type', LOW),
    col('created_at', TIME),
    col('data', 'String'),
    col('recorded_at', TIME, { default: 'now64(3)' }),
  ],
  engine: 'ReplacingMergeTree',
  orderBy: '(recorded_at, id)',
  ttl: `toDateTime(recorded_at) + toIntervalDay(${EVENT_RETENTION_DAYS})`,
  settings: [DEDUP],
  shardKey: 'cityHash64(id)',
};

export const WEBHOOK_ENDPOINTS: TableSpec = {
  name: 'webhook_endpoints',
  columns: [
    col('id', 'String'),
    col('environment', LOW),
    col('url', 'String'),
    col('events', 'Array(String)'),
    col('secret', 'String'),
    col('status', LOW),
    col('created_at', TIME),
    col('first_410_at', NULLABLE_TIME),
    col('disabled_at', NULLABLE_TIME),
    col('updated_at', TIME),
    // rotate-secret keeps the previous secret signing alongside for 24 h.
    col('previous_secret', 'String', { default: "''", since: 8 }),
    col('previous_secret_until', NULLABLE_TIME, { since: 8 }),
  ],
  engine: 'ReplacingMergeTree',
  version: 'updated_at',
  orderBy: 'id',
  shardKey: 'cityHash64(id)',
};

export const WEBHOOK_DELIVERIES: TableSpec = {
  name: 'webhook_deliveries',
  columns: [
    col('id', 'String'),
    col('environment', LOW),
    col('endpoint_id', 'String'),
    col('event_id', 'String'),
    col('event_type', LOW),
    col('payload', 'String'),
    col('attempt', 'UInt8'),
    col('max_attempts', 'UInt8'),
    col('status', LOW),
    col('response_status', 'UInt16'),
    col('response_body', 'String'),
    col('duration_ms', 'UInt32'),
    col('is_replay', 'UInt8'),
    col('replay_of', 'String'),
    col('created_at', TIME),
    col('next_attempt_at', NULLABLE_TIME),
    col('updated_at', TIME),
  ],
  indexes: [{ name: 'idx_event', expr: 'event_id', type: 'bloom_filter', granularity: 4 }],
  engine: 'ReplacingMergeTree',
  version: 'updated_at',
  orderBy: '(environment, id)',
  shardKey: 'cityHash64(id)',
};

/** Every attempt of a delivery (a delivery row holds only its latest state). */
export const WEBHOOK_ATTEMPTS: TableSpec = {
  name: 'webhook_attempts',
  columns: [
    col('environment', LOW),
    col('delivery_id', 'String'),
    col('attempt', 'UInt8'),
    col('at', TIME),
    col('response_status', 'UInt16'),
    col('duration_ms', 'UInt32'),
    col('error', 'String'),
    col('response_body', 'String'),
  ],
  engine: 'ReplacingMergeTree',
  orderBy: '(environment, delivery_id, attempt)',
  ttl: `toDateTime(at) + toIntervalDay(${EVENT_RETENTION_DAYS})`,
  shardKey: 'cityHash64(delivery_id)',
};

/**
 * Every endpoint deletion written, never replaced (as key_revocations): a version another
 * instance wrote from an older read (a PATCH, a rotation, a delivery's answer) would
 * otherwise replace the delete in webhook_endpoints. An endpoint with a row here is deleted.
 */
export const WEBHOOK_ENDPOINT_DELETIONS: TableSpec = {
  name: 'webhook_endpoint_deletions',
  columns: [
    col('id', 'String'),
    col('deleted_at', TIME),
    // The updated_at of the endpoint version that carried it.
    col('written_at', TIME),
  ],
  engine: 'MergeTree',
  orderBy: 'id',
  shardKey: 'cityHash64(id)',
};

export const WEBHOOK_FANOUT_CURSOR: TableSpec = {
  name: 'webhook_fanout_cursor',
  columns: [col('instance', 'UInt16'), col('recorded_at', TIME), col('updated_at', TIME)],
  engine: 'ReplacingMergeTree',
  version: 'updated_at',
  orderBy: 'instance',
  shardKey: 'instance',
};

/** The migration ledger: on a cluster one replicated table every node shares (no shard). */
export const SCHEMA_MIGRATIONS: TableSpec = {
  name: 'schema_migrations',
  columns: [col('version', 'UInt32'), col('name', 'String'), col('applied_at', TIME)],
  engine: 'MergeTree',
  orderBy: 'version',
  shardKey: null,
};

/** The tables that hold data, in the order a cluster makes them. */
export const TABLES: readonly TableSpec[] = [
  WAKES,
  API_KEYS,
  KEY_REVOCATIONS,
  KEY_USAGE,
  EVENTS,
  WEBHOOK_ENDPOINTS,
  WEBHOOK_ENDPOINT_DELETIONS,
  WEBHOOK_DELIVERIES,
  WEBHOOK_FANOUT_CURSOR,
  WEBHOOK_ATTEMPTS,
  WAKE_DETAILS,
];

/**
 * Every field of a wake log line, in order, with the type the engine reads it as
 * (the log table's columns: capture/wake-log.ts writes the lines, a test pins that
 * its fields are these). The wakes' columns first, then what the table does not
 * hold, then the detail's cells.
 */
export const wakeLogColumns = (asOf?: number): readonly Column[] => [
  ...WAKES.columns
    .filter((c) => asOf === undefined || c.since === undefined || c.since <= asOf)
    .map((c) => col(c.name, c.type === LOW ? 'String' : c.type)),
  col('refused', 'UInt8'),
  col('has_detail', 'UInt8'),
  ...WAKE_DETAILS.columns.slice(3, -1).map((c) => col(c.name, c.type === LOW ? 'String' : c.type)),
];

/** Today's fields of a wake log line (the log table as migration `asOf` made it: wakeLogColumns(asOf)). */
export const WAKE_LOG_COLUMNS: readonly Column[] = wakeLogColumns();
