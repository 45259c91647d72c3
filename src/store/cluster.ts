import { DETAIL_COMPACT_PARTS, DETAIL_GRANULE, detailTableSql } from './detail-table.js';
import type { Migration } from './migrations.js';
import { logTableStatements } from './wake-log.js';

/**
 * The schema on a ClickHouse cluster (storage.cluster): each table is a
 * Replicated*MergeTree `<table>_local` on every node (ON CLUSTER, Keeper path
 * /clickhouse/tables/{shard}/wakegate/<table>, replica {replica}) with a Distributed
 * table named as on a single server in front of it, so every query and insert the
 * gateway makes is the same text. Inserts go through the Distributed tables with
 * distributed_foreground_insert=1 (a retried segment is deduplicated by the replicated
 * tables under its token). A cluster is new to wakegate: it gets today's schema in
 * one step, recorded as the version a single server reaches one migration at a time.
 *
 * Untested on a real cluster (none can run where the tests run): the tests check the
 * text each statement produces, and that the tables have a single server's columns.
 */

/** Rows of a table land on one shard by id, so ReplacingMergeTree's FINAL sees every version of a row. */
const SHARD_KEYS: Record<string, string> = {
  wakes: 'cityHash64(id)',
  wake_details: 'cityHash64(id)',
  api_keys: 'cityHash64(id)',
  key_usage: 'cityHash64(key_id)',
  events: 'cityHash64(id)',
  webhook_endpoints: 'cityHash64(id)',
  webhook_deliveries: 'cityHash64(id)',
  webhook_attempts: 'cityHash64(delivery_id)',
  webhook_fanout_cursor: 'instance',
};

/** Settings every query of a cluster's store carries. */
export const CLUSTER_SETTINGS = {
  distributed_foreground_insert: 1,
  // The views under the log table write through Distributed tables too.
  deduplicate_blocks_in_dependent_materialized_views: 1,
} as const;

export const localTable = (table: string): string => `${table}_local`;

/** A single server's CREATE TABLE as the replicated local table and the Distributed one in front. */
export function replicatedTable(createSql: string, cluster: string): string[] {
  const m = /CREATE TABLE IF NOT EXISTS \{db\}\.(\w+) \(/.exec(createSql);
  if (!m) throw new Error(`not a CREATE TABLE statement: ${createSql.slice(0, 80)}`);
  const table = m[1] as string;
  const shardKey = SHARD_KEYS[table];
  if (!shardKey) throw new Error(`no shard key for table ${table}`);
  const local = createSql
    .replace(m[0], `CREATE TABLE IF NOT EXISTS {db}.${localTable(table)} ON CLUSTER ${cluster} (`)
    .replace(/ENGINE = (\w*)MergeTree(\(([^)]*)\))?/, (_all, kind: string, _p, args: string | undefined) => {
      const path = `'/clickhouse/tables/{shard}/wakegate/${table}', '{replica}'`;
      return `ENGINE = Replicated${kind}MergeTree(${path}${args ? `, ${args}` : ''})`;
    })
    // Replicated tables deduplicate inserts themselves (replicated_deduplication_window).
    .replace(/non_replicated_deduplication_window = \d+,\s*/, '')
    .replace(/,\s*non_replicated_deduplication_window = \d+/, '')
    .replace(/\s*SETTINGS non_replicated_deduplication_window = \d+/, '');
  const front = `CREATE TABLE IF NOT EXISTS {db}.${table} ON CLUSTER ${cluster} AS {db}.${localTable(table)}
      ENGINE = Distributed(${cluster}, {db}, ${localTable(table)}, ${shardKey})`;
  return [local, front];
}

/** Today's schema, as single-server CREATE statements (each migration's final shape). */
export function currentTables(history: readonly Migration[]): string[] {
  const at = (v: number, i = 0) => history.find((m) => m.version === v)?.statements[i] as string;
  // Migration 5 dropped the path index; 6 and 9 added two columns.
  const wakes = at(1)
    .replace(/,\s*INDEX idx_path [^\n]*\n/, '\n')
    .replace(
      /(\s*)INDEX idx_status/,
      "$1path_truncated UInt8 DEFAULT 0,$1replay_of String DEFAULT '',$1INDEX idx_status",
    );
  const endpoints = at(4, 0).replace(
    /(updated_at DateTime64\(3, 'UTC'\))(\s*\) ENGINE)/,
    "$1,\n        previous_secret String DEFAULT '',\n        previous_secret_until Nullable(DateTime64(3, 'UTC'))$2",
  );
  // Migration 15 added the bootstrap marker to api_keys.
  const apiKeys = at(2, 0).replace(
    /(updated_at DateTime64\(3, 'UTC'\))(\s*\) ENGINE)/,
    '$1,\n        bootstrap UInt8 DEFAULT 0$2',
  );
  return [
    wakes,
    apiKeys,
    at(2, 1),
    at(7, 0).replace('{db}.events_v7 (', '{db}.events ('),
    endpoints,
    at(4, 1),
    at(4, 2),
    at(8, 2),
    detailTableSql(
      '{db}',
      'wake_details',
      `${DETAIL_GRANULE}, ${DETAIL_COMPACT_PARTS},
        vertical_merge_algorithm_min_rows_to_activate = 1, vertical_merge_algorithm_min_columns_to_activate = 1,
        merge_selector_base = 20`,
    ),
  ];
}

/** The migrations of a cluster: today's schema in one step, at the latest single-server version. */
export function clusterMigrations(history: readonly Migration[], cluster: string): Migration[] {
  const latest = Math.max(...history.map((m) => m.version));
  const tables = currentTables(history).flatMap((sql) => replicatedTable(sql, cluster));
  const log = logTableStatements('{db}').map((sql) =>
    sql.replace(/^(CREATE (?:TABLE|MATERIALIZED VIEW) IF NOT EXISTS \{db\}\.\w+)/, `$1 ON CLUSTER ${cluster}`),
  );
  return [{ version: latest, name: `cluster_schema_${latest}`, statements: [...tables, ...log] }];
}

/** The migration ledger of a cluster: one replicated table every node shares (no shard in its path). */
export const clusterLedger = (db: string, cluster: string): string =>
  `CREATE TABLE IF NOT EXISTS ${db}.schema_migrations ON CLUSTER ${cluster} (
  version UInt32, name String, applied_at DateTime64(3, 'UTC')
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/wakegate/schema_migrations', '{replica}') ORDER BY version`;
