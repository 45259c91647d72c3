CREATE TABLE IF NOT EXISTS {db}.schema_migrations ON CLUSTER wg_cluster (
  version UInt32,
  name String,
  applied_at DateTime64(3, 'UTC')
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/wakegate/schema_migrations', '{replica}')
  ORDER BY version;

CREATE TABLE IF NOT EXISTS {db}.wakes_local ON CLUSTER wg_cluster (
  id String,
  environment LowCardinality(String),
  captured_at DateTime64(3, 'UTC'),
  method LowCardinality(String),
  path String,
  route LowCardinality(String),
  status UInt16,
  latency_ms UInt32,
  consumer String,
  key_id String,
  region LowCardinality(String),
  request_bytes UInt64,
  response_bytes UInt64,
  client_ip String,
  user_agent String,
  retention_days UInt16,
  path_truncated UInt8 DEFAULT 0,
  replay_of String DEFAULT '',
  protocol LowCardinality(String) DEFAULT 'http/1.1',
  tls_subject String DEFAULT '',
  tls_fingerprint String DEFAULT '',
  trace_id String DEFAULT '',
  span_id String DEFAULT '',
  INDEX idx_status status TYPE minmax GRANULARITY 4,
  INDEX idx_latency latency_ms TYPE minmax GRANULARITY 4,
  INDEX idx_key key_id TYPE bloom_filter GRANULARITY 4,
  INDEX idx_consumer consumer TYPE bloom_filter GRANULARITY 4,
  INDEX idx_trace trace_id TYPE bloom_filter GRANULARITY 4
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/wakegate/wakes', '{replica}')
  PARTITION BY toDate(captured_at)
  ORDER BY (environment, captured_at, id)
  TTL toDateTime(captured_at) + toIntervalDay(retention_days);

CREATE TABLE IF NOT EXISTS {db}.wakes ON CLUSTER wg_cluster AS {db}.wakes_local
  ENGINE = Distributed(wg_cluster, {db}, wakes_local, cityHash64(id));

CREATE TABLE IF NOT EXISTS {db}.api_keys_local ON CLUSTER wg_cluster (
  id String,
  environment LowCardinality(String),
  label String,
  consumer String,
  scopes Array(String),
  rate_limit String,
  replaces String,
  secret_hash String,
  created_at DateTime64(3, 'UTC'),
  revoke_at Nullable(DateTime64(3, 'UTC')),
  revoked_at Nullable(DateTime64(3, 'UTC')),
  updated_at DateTime64(3, 'UTC'),
  bootstrap UInt8 DEFAULT 0,
  tls_fingerprint String DEFAULT '',
  bucket String DEFAULT ''
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/wakegate/api_keys', '{replica}', updated_at)
  ORDER BY id;

CREATE TABLE IF NOT EXISTS {db}.api_keys ON CLUSTER wg_cluster AS {db}.api_keys_local
  ENGINE = Distributed(wg_cluster, {db}, api_keys_local, cityHash64(id));

CREATE TABLE IF NOT EXISTS {db}.key_revocations_local ON CLUSTER wg_cluster (
  id String,
  revoke_at Nullable(DateTime64(3, 'UTC')),
  revoked_at Nullable(DateTime64(3, 'UTC')),
  written_at DateTime64(3, 'UTC')
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/wakegate/key_revocations', '{replica}')
  ORDER BY id;

CREATE TABLE IF NOT EXISTS {db}.key_revocations ON CLUSTER wg_cluster AS {db}.key_revocations_local
  ENGINE = Distributed(wg_cluster, {db}, key_revocations_local, cityHash64(id));

CREATE TABLE IF NOT EXISTS {db}.key_usage_local ON CLUSTER wg_cluster (
  key_id String,
  last_used_at DateTime64(3, 'UTC')
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/wakegate/key_usage', '{replica}', last_used_at)
  ORDER BY key_id;

CREATE TABLE IF NOT EXISTS {db}.key_usage ON CLUSTER wg_cluster AS {db}.key_usage_local
  ENGINE = Distributed(wg_cluster, {db}, key_usage_local, cityHash64(key_id));

CREATE TABLE IF NOT EXISTS {db}.events_local ON CLUSTER wg_cluster (
  id String,
  environment LowCardinality(String),
  type LowCardinality(String),
  created_at DateTime64(3, 'UTC'),
  data String,
  recorded_at DateTime64(3, 'UTC') DEFAULT now64(3)
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/wakegate/events', '{replica}')
  ORDER BY (recorded_at, id)
  TTL toDateTime(recorded_at) + toIntervalDay(30);

CREATE TABLE IF NOT EXISTS {db}.events ON CLUSTER wg_cluster AS {db}.events_local
  ENGINE = Distributed(wg_cluster, {db}, events_local, cityHash64(id));

CREATE TABLE IF NOT EXISTS {db}.webhook_endpoints_local ON CLUSTER wg_cluster (
  id String,
  environment LowCardinality(String),
  url String,
  events Array(String),
  secret String,
  status LowCardinality(String),
  created_at DateTime64(3, 'UTC'),
  first_410_at Nullable(DateTime64(3, 'UTC')),
  disabled_at Nullable(DateTime64(3, 'UTC')),
  updated_at DateTime64(3, 'UTC'),
  previous_secret String DEFAULT '',
  previous_secret_until Nullable(DateTime64(3, 'UTC'))
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/wakegate/webhook_endpoints', '{replica}', updated_at)
  ORDER BY id;

CREATE TABLE IF NOT EXISTS {db}.webhook_endpoints ON CLUSTER wg_cluster AS {db}.webhook_endpoints_local
  ENGINE = Distributed(wg_cluster, {db}, webhook_endpoints_local, cityHash64(id));

CREATE TABLE IF NOT EXISTS {db}.webhook_endpoint_deletions_local ON CLUSTER wg_cluster (
  id String,
  deleted_at DateTime64(3, 'UTC'),
  written_at DateTime64(3, 'UTC')
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/wakegate/webhook_endpoint_deletions', '{replica}')
  ORDER BY id;

CREATE TABLE IF NOT EXISTS {db}.webhook_endpoint_deletions ON CLUSTER wg_cluster AS {db}.webhook_endpoint_deletions_local
  ENGINE = Distributed(wg_cluster, {db}, webhook_endpoint_deletions_local, cityHash64(id));

CREATE TABLE IF NOT EXISTS {db}.webhook_deliveries_local ON CLUSTER wg_cluster (
  id String,
  environment LowCardinality(String),
  endpoint_id String,
  event_id String,
  event_type LowCardinality(String),
  payload String,
  attempt UInt8,
  max_attempts UInt8,
  status LowCardinality(String),
  response_status UInt16,
  response_body String,
  duration_ms UInt32,
  is_replay UInt8,
  replay_of String,
  created_at DateTime64(3, 'UTC'),
  next_attempt_at Nullable(DateTime64(3, 'UTC')),
  updated_at DateTime64(3, 'UTC'),
  INDEX idx_event event_id TYPE bloom_filter GRANULARITY 4
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/wakegate/webhook_deliveries', '{replica}', updated_at)
  ORDER BY (environment, id);

CREATE TABLE IF NOT EXISTS {db}.webhook_deliveries ON CLUSTER wg_cluster AS {db}.webhook_deliveries_local
  ENGINE = Distributed(wg_cluster, {db}, webhook_deliveries_local, cityHash64(id));

CREATE TABLE IF NOT EXISTS {db}.webhook_fanout_cursor_local ON CLUSTER wg_cluster (
  instance UInt16,
  recorded_at DateTime64(3, 'UTC'),
  updated_at DateTime64(3, 'UTC')
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/wakegate/webhook_fanout_cursor', '{replica}', updated_at)
  ORDER BY instance;

CREATE TABLE IF NOT EXISTS {db}.webhook_fanout_cursor ON CLUSTER wg_cluster AS {db}.webhook_fanout_cursor_local
  ENGINE = Distributed(wg_cluster, {db}, webhook_fanout_cursor_local, instance);

CREATE TABLE IF NOT EXISTS {db}.webhook_attempts_local ON CLUSTER wg_cluster (
  environment LowCardinality(String),
  delivery_id String,
  attempt UInt8,
  at DateTime64(3, 'UTC'),
  response_status UInt16,
  duration_ms UInt32,
  error String,
  response_body String
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/wakegate/webhook_attempts', '{replica}')
  ORDER BY (environment, delivery_id, attempt)
  TTL toDateTime(at) + toIntervalDay(30);

CREATE TABLE IF NOT EXISTS {db}.webhook_attempts ON CLUSTER wg_cluster AS {db}.webhook_attempts_local
  ENGINE = Distributed(wg_cluster, {db}, webhook_attempts_local, cityHash64(delivery_id));

CREATE TABLE IF NOT EXISTS {db}.wake_details_local ON CLUSTER wg_cluster (
  id String,
  environment LowCardinality(String),
  captured_at DateTime64(3, 'UTC'),
  query String CODEC(LZ4),
  request_headers String CODEC(LZ4),
  response_headers String CODEC(LZ4),
  request_body String CODEC(LZ4),
  request_body_bytes UInt64,
  request_body_state Int8,
  request_body_encoding LowCardinality(String),
  response_body String CODEC(LZ4),
  response_body_bytes UInt64,
  response_body_state Int8,
  response_body_encoding LowCardinality(String),
  diff String CODEC(LZ4),
  retention_days UInt16
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/wakegate/wake_details', '{replica}')
  PARTITION BY toDate(captured_at)
  ORDER BY (environment, captured_at, id)
  TTL toDateTime(captured_at) + toIntervalDay(retention_days)
  SETTINGS index_granularity_bytes = 1048576, min_bytes_for_wide_part = 1073741824, vertical_merge_algorithm_min_rows_to_activate = 1, vertical_merge_algorithm_min_columns_to_activate = 1, merge_selector_base = 20;

CREATE TABLE IF NOT EXISTS {db}.wake_details ON CLUSTER wg_cluster AS {db}.wake_details_local
  ENGINE = Distributed(wg_cluster, {db}, wake_details_local, cityHash64(id));

CREATE TABLE IF NOT EXISTS {db}.wake_log ON CLUSTER wg_cluster (id String, environment String, captured_at DateTime64(3, 'UTC'), method String, path String, route String, status UInt16, latency_ms UInt32, consumer String, key_id String, region String, request_bytes UInt64, response_bytes UInt64, client_ip String, user_agent String, retention_days UInt16, path_truncated UInt8, replay_of String, protocol String, tls_subject String, tls_fingerprint String, trace_id String, span_id String, refused UInt8, has_detail UInt8, query String, request_headers String, response_headers String, request_body String, request_body_bytes UInt64, request_body_state Int8, request_body_encoding String, response_body String, response_body_bytes UInt64, response_body_state Int8, response_body_encoding String, diff String) ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.wake_log_wakes ON CLUSTER wg_cluster TO {db}.wakes
    AS SELECT id, environment, captured_at, method, path, route, status, latency_ms, consumer, key_id, region, request_bytes, response_bytes, client_ip, user_agent, retention_days, path_truncated, replay_of, protocol, tls_subject, tls_fingerprint, trace_id, span_id FROM {db}.wake_log;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.wake_log_details ON CLUSTER wg_cluster TO {db}.wake_details
    AS SELECT id, environment, captured_at, query, request_headers, response_headers, request_body, request_body_bytes, request_body_state, request_body_encoding, response_body, response_body_bytes, response_body_state, response_body_encoding, diff, retention_days FROM {db}.wake_log WHERE has_detail = 1;
