import { isUnknownSetting, type Store } from './client.js';
import { clusterLedger, clusterMigrations } from './cluster.js';
import { DETAIL_COMPACT_PARTS, detailTableSql, remakeDetailTable } from './detail-table.js';
import { logTableStatements } from './wake-log.js';

/** How long events (the source of webhook deliveries) are kept. */
export const EVENT_RETENTION_DAYS = 30;

export interface Migration {
  version: number;
  name: string;
  /** Statements; `{db}` is replaced by the (validated) database identifier. */
  statements: string[];
  /**
   * A table setting for speed only: a ClickHouse server too old to know it refuses
   * it, and then the table keeps its default (recorded as applied all the same).
   */
  tuning?: boolean;
  /** A step that statements cannot express, run after them. */
  run?: (store: Store) => Promise<void>;
}

/**
 * The schema, in order. A migration never changes once released: a change is a
 * new migration. Tables that hold mutable records use ReplacingMergeTree keyed by
 * id and versioned by `updated_at`, and are read with FINAL.
 */
export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'wakes',
    statements: [
      `CREATE TABLE IF NOT EXISTS {db}.wakes (
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
        INDEX idx_status status TYPE minmax GRANULARITY 4,
        INDEX idx_latency latency_ms TYPE minmax GRANULARITY 4,
        INDEX idx_key key_id TYPE bloom_filter GRANULARITY 4,
        INDEX idx_consumer consumer TYPE bloom_filter GRANULARITY 4,
        INDEX idx_path path TYPE ngrambf_v1(3, 4096, 2, 0) GRANULARITY 4
      ) ENGINE = MergeTree
      PARTITION BY toDate(captured_at)
      ORDER BY (environment, captured_at, id)
      TTL toDateTime(captured_at) + toIntervalDay(retention_days)
      SETTINGS non_replicated_deduplication_window = 10000`,
    ],
  },
  {
    version: 2,
    name: 'api_keys',
    statements: [
      `CREATE TABLE IF NOT EXISTS {db}.api_keys (
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
        updated_at DateTime64(3, 'UTC')
      ) ENGINE = ReplacingMergeTree(updated_at) ORDER BY id`,
      `CREATE TABLE IF NOT EXISTS {db}.key_usage (
        key_id String,
        last_used_at DateTime64(3, 'UTC')
      ) ENGINE = ReplacingMergeTree(last_used_at) ORDER BY key_id`,
    ],
  },
  {
    version: 3,
    name: 'events',
    statements: [
      `CREATE TABLE IF NOT EXISTS {db}.events (
        id String,
        environment LowCardinality(String),
        type LowCardinality(String),
        created_at DateTime64(3, 'UTC'),
        data String,
        recorded_at DateTime64(3, 'UTC') DEFAULT now64(3)
      ) ENGINE = ReplacingMergeTree ORDER BY (created_at, id)
      SETTINGS non_replicated_deduplication_window = 10000`,
    ],
  },
  {
    version: 4,
    name: 'webhooks',
    statements: [
      `CREATE TABLE IF NOT EXISTS {db}.webhook_endpoints (
        id String,
        environment LowCardinality(String),
        url String,
        events Array(String),
        secret String,
        status LowCardinality(String),
        created_at DateTime64(3, 'UTC'),
        first_410_at Nullable(DateTime64(3, 'UTC')),
        disabled_at Nullable(DateTime64(3, 'UTC')),
        updated_at DateTime64(3, 'UTC')
      ) ENGINE = ReplacingMergeTree(updated_at) ORDER BY id`,
      `CREATE TABLE IF NOT EXISTS {db}.webhook_deliveries (
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
      ) ENGINE = ReplacingMergeTree(updated_at) ORDER BY (environment, id)`,
      `CREATE TABLE IF NOT EXISTS {db}.webhook_fanout_cursor (
        instance UInt16,
        recorded_at DateTime64(3, 'UTC'),
        updated_at DateTime64(3, 'UTC')
      ) ENGINE = ReplacingMergeTree(updated_at) ORDER BY instance`,
    ],
  },
  {
    version: 5,
    name: 'wakes_drop_path_ngram_index',
    // The ngram index on path cost about a third of the CPU of every insert and merge
    // (measured: bench/RESULTS.md) and cannot serve the anchored regex a path template
    // becomes, so it goes.
    statements: ['ALTER TABLE {db}.wakes DROP INDEX IF EXISTS idx_path'],
  },
  {
    version: 6,
    name: 'wakes_path_truncated',
    // Stored paths are capped at 2 KB; the wake says when its path was cut.
    statements: ['ALTER TABLE {db}.wakes ADD COLUMN IF NOT EXISTS path_truncated UInt8 DEFAULT 0'],
  },
  {
    version: 7,
    name: 'events_by_recorded_at_with_ttl',
    // The fan-out polls by recording order several times a second; the table is
    // now sorted by it (so a poll reads only the newest granules, not the whole
    // table) and events expire like the deliveries made from them.
    statements: [
      `CREATE TABLE IF NOT EXISTS {db}.events_v7 (
        id String,
        environment LowCardinality(String),
        type LowCardinality(String),
        created_at DateTime64(3, 'UTC'),
        data String,
        recorded_at DateTime64(3, 'UTC') DEFAULT now64(3)
      ) ENGINE = ReplacingMergeTree ORDER BY (recorded_at, id)
      TTL toDateTime(recorded_at) + toIntervalDay(${EVENT_RETENTION_DAYS})
      SETTINGS non_replicated_deduplication_window = 10000`,
      `INSERT INTO {db}.events_v7 (id, environment, type, created_at, data, recorded_at)
        SELECT id, environment, type, created_at, data, recorded_at FROM {db}.events`,
      'DROP TABLE {db}.events',
      'RENAME TABLE {db}.events_v7 TO {db}.events',
    ],
  },
  {
    version: 8,
    name: 'webhook_secret_rotation_and_attempts',
    // rotate-secret keeps the previous secret signing alongside for 24 h; every
    // attempt of a delivery is kept (a delivery row holds only its latest state).
    statements: [
      "ALTER TABLE {db}.webhook_endpoints ADD COLUMN IF NOT EXISTS previous_secret String DEFAULT ''",
      "ALTER TABLE {db}.webhook_endpoints ADD COLUMN IF NOT EXISTS previous_secret_until Nullable(DateTime64(3, 'UTC'))",
      `CREATE TABLE IF NOT EXISTS {db}.webhook_attempts (
        environment LowCardinality(String),
        delivery_id String,
        attempt UInt8,
        at DateTime64(3, 'UTC'),
        response_status UInt16,
        duration_ms UInt32,
        error String,
        response_body String
      ) ENGINE = ReplacingMergeTree ORDER BY (environment, delivery_id, attempt)
      TTL toDateTime(at) + toIntervalDay(${EVENT_RETENTION_DAYS})`,
    ],
  },
  {
    version: 9,
    name: 'wake_details_and_replays',
    // The exchange a wake keeps (redacted), in its own compressed table read only by
    // GET /v2/wakes/{id}, with the wake's retention; a replay's wake names the original.
    statements: [
      "ALTER TABLE {db}.wakes ADD COLUMN IF NOT EXISTS replay_of String DEFAULT ''",
      detailTableSql('{db}', 'wake_details', 'non_replicated_deduplication_window = 10000'),
    ],
  },
  {
    version: 10,
    name: 'wake_details_vertical_merges',
    // Detail rows are wide (bodies up to max_body_bytes): merging them a column at a
    // time, not all columns at once, lowered the engine's peak memory by 60 to 190 MB
    // with 32 KB bodies (24,000 rows inserted alone: peak 857-955 -> 765-794 MB; the
    // gateway under load: 1,008-1,074 -> 927-971 MB), at the same CPU.
    statements: [
      `ALTER TABLE {db}.wake_details MODIFY SETTING
        vertical_merge_algorithm_min_rows_to_activate = 1,
        vertical_merge_algorithm_min_columns_to_activate = 1`,
    ],
  },
  {
    version: 11,
    name: 'wake_details_fewer_merges',
    // Detail rows are read one wake at a time, never scanned, so the table can keep
    // more parts and merge each row fewer times: base 20 (default 5) halved the
    // merge threads' CPU per row (32 KB bodies: 23.2 -> 11.8 us; 1 KB: 3.5 -> 1.8 us;
    // 60,000 rows in 30 inserts left 14 parts instead of 5).
    statements: ['ALTER TABLE {db}.wake_details MODIFY SETTING merge_selector_base = 20'],
    tuning: true,
  },
  {
    version: 12,
    name: 'wake_details_small_granules',
    // A merge reads a granule of every part it merges at once; detail granules held up
    // to 10 MB (8,192 rows of 1 KB bodies), so merging 20 parts took 100 to 160 MB for
    // a few seconds every few seconds (bench:memory: peak +178 MB over idle, mean +95
    // to +108). 1 MB granules: peak +141 to +143, mean +93 to +95. The setting cannot
    // be altered, so the table is remade (its parts attached, not copied).
    statements: [],
    run: remakeDetailTable,
  },
  {
    version: 13,
    name: 'wake_log_table',
    // A segment of the wake log is one insert into a Null table whose two views fill
    // wakes and wake_details, where it was an insert into each: the file is read and
    // parsed once, and the engine's fixed cost of an insert (about 3 ms) is paid once.
    statements: logTableStatements('{db}'),
  },
  {
    version: 14,
    name: 'wake_details_compact_parts',
    // A part the engine writes "wide" is two files a column (about 50 for detail), a
    // "compact" one about a dozen in all. Detail parts passed the 10 MB default at once
    // with large bodies (a segment of 2,500 wakes with 32 KB answers is 80 MB), and the
    // kernel's work creating and deleting those files was most of the insert's system
    // time. Parts up to 1 GiB are now compact: 2,500 wakes with 32 KB bodies, inserted
    // alone, 35-38 -> 16-20 us of system time and 56-58 -> 35-39 us of wall time a row
    // (three runs each; 1 KB bodies unchanged, their parts were compact already).
    // Detail is read a wake at a time (every column of it), so the compact format costs
    // no read; merged parts past 1 GiB are wide, as before.
    statements: [`ALTER TABLE {db}.wake_details MODIFY SETTING ${DETAIL_COMPACT_PARTS}`],
    tuning: true,
  },
  {
    version: 15,
    name: 'api_keys_bootstrap',
    // Marks the bootstrap admin key, so a start with another WAKEGATE_ADMIN_KEY knows
    // which key the new one replaces (one bootstrap admin key at a time).
    statements: ['ALTER TABLE {db}.api_keys ADD COLUMN IF NOT EXISTS bootstrap UInt8 DEFAULT 0'],
  },
];

const ledger = (db: string) => `CREATE TABLE IF NOT EXISTS ${db}.schema_migrations (
  version UInt32, name String, applied_at DateTime64(3, 'UTC')
) ENGINE = MergeTree ORDER BY version`;

/** The migrations a store gets: one at a time on a single server, today's schema at once on a cluster. */
export const migrationsFor = (store: Pick<Store, 'cluster'>): Migration[] =>
  store.cluster === null ? MIGRATIONS : clusterMigrations(MIGRATIONS, store.cluster);

/** Applies every migration not yet recorded, in order, and records each. Returns the applied versions. */
export async function migrate(store: Store, migrations: Migration[] = migrationsFor(store)): Promise<number[]> {
  const { client, db, cluster } = store;
  const onCluster = cluster === null ? '' : ` ON CLUSTER ${cluster}`;
  await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${db}${onCluster}` });
  await client.command({ query: cluster === null ? ledger(db) : clusterLedger(db, cluster) });
  const rs = await client.query({ query: `SELECT version FROM ${db}.schema_migrations`, format: 'JSONEachRow' });
  const done = new Set((await rs.json<{ version: number }>()).map((r) => Number(r.version)));
  const applied: number[] = [];
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (done.has(m.version)) continue;
    for (const sql of m.statements) {
      try {
        await client.command({ query: sql.replaceAll('{db}', db) });
      } catch (e) {
        if (!(m.tuning && isUnknownSetting(e))) throw e;
      }
    }
    if (m.run) await m.run(store);
    await client.insert({
      table: `${db}.schema_migrations`,
      values: [{ version: m.version, name: m.name, applied_at: Date.now() }],
      format: 'JSONEachRow',
    });
    applied.push(m.version);
  }
  return applied;
}

/** True when every known migration is recorded (the /readyz check). */
export async function migrationsApplied(store: Store): Promise<boolean> {
  const rs = await store.client.query({
    query: `SELECT max(version) AS v FROM ${store.db}.schema_migrations`,
    format: 'JSONEachRow',
  });
  const [row] = await rs.json<{ v: number }>();
  const latest = Math.max(...MIGRATIONS.map((m) => m.version));
  return Number(row?.v ?? 0) >= latest;
}
