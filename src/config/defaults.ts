/**
 * The defaults of DESIGN.md's configuration file. A config file names only what it
 * changes; each section it names is merged over these key by key, and a list
 * (such as `routes`) replaces the default list.
 */
export const defaults = {
  server: {
    port: 8080,
    host: '0.0.0.0',
    ops_port: 8081,
    ops_host: '127.0.0.1',
    region: 'local',
    headers_timeout_ms: 10_000,
    request_timeout_ms: 300_000,
    keep_alive_timeout_ms: 5_000,
    max_header_bytes: 16_384,
    api_body_limit_bytes: 1_048_576,
    max_connections: 20_000,
    tunnel_idle_timeout_ms: 300_000,
    trusted_proxies: [],
  },
  storage: {
    data_dir: './data',
    clickhouse_url: null,
    clickhouse_user: null,
    clickhouse_password: null,
    clickhouse_database: 'wakegate',
    cluster: null,
    spool_max_bytes: 1_073_741_824,
    key_poll_interval_ms: 1_000,
    encryption_key: null,
  },
  environments: {
    production: { class: 'live', wake_retention_days: 30 },
    sandbox: { class: 'test', wake_retention_days: 7 },
  },
  capture: { batch_rows: 5000, flush_interval_ms: 500, max_buffered_rows: 200_000, max_inflight_batches: 2 },
  routes: [
    {
      name: 'payments',
      prefix: '/v2/payments',
      strip_prefix: false,
      auth: 'required',
      scopes: { read: 'payments:read', write: 'payments:write' },
      origins: { production: 'http://127.0.0.1:9001', sandbox: 'http://127.0.0.1:9002' },
      timeout_ms: 30_000,
      latency_objective_ms: 800,
      availability_objective: 0.999,
      rate_limit: 'default',
    },
  ],
  rate_limits: {
    default: { limit: 6000, burst: 9000, window: 'minute' },
    reports: { limit: 600, burst: 600, window: 'minute' },
    webhook_registration: { limit: 120, burst: 120, window: 'hour' },
    sandbox: { limit: 1200, burst: 1200, window: 'minute', shared: true },
    // Requests whose key is refused (missing, malformed, unknown, revoked), per client address.
    unauthenticated: { limit: 600, burst: 600, window: 'minute' },
  },
  webhooks: {
    timeout_ms: 10_000,
    retry_schedule_s: [5, 300, 1800, 3600, 7200, 18000, 34200],
    jitter: 0.1,
    allow_insecure_http: false,
    allow_private_networks: false,
    disable_after_410_days: 7,
    max_concurrency: 64,
    max_per_endpoint: 4,
    max_queued_events: 100_000,
    dead_letter_retention_days: 30,
  },
  instance: { index: 0, count: 1 },
  ratelimit: { max_buckets: 200_000, sketch_cells: 65_536 },
  log: { level: 'info', access: false },
  admin_key: null,
} as const;
