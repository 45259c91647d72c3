import { clusterTableSql } from './ddl.js';
import { SCHEMA_MIGRATIONS, TABLES } from './schema.js';
import { logTableStatements } from './wake-log-table.js';

/**
 * The schema on a ClickHouse cluster (storage.cluster), made from the same table
 * descriptions as a single server's (schema.ts): each table a Replicated*MergeTree
 * `<table>_local` on every node with a Distributed table named as on a single server
 * in front of it, so every query and insert the gateway makes is the same text.
 * Inserts go through the Distributed tables with distributed_foreground_insert=1 (a
 * retried segment is deduplicated by the replicated tables under its token). A
 * cluster is new to wakegate: it gets today's schema in one step, recorded as the
 * version a single server reaches one migration at a time.
 *
 * Untested on a real cluster (none can run where the tests run): the tests check the
 * text each statement produces, and that the tables have a single server's columns.
 */

/** Settings every query of a cluster's store carries. */
export const CLUSTER_SETTINGS = {
  distributed_foreground_insert: 1,
  // The views under the log table write through Distributed tables too.
  deduplicate_blocks_in_dependent_materialized_views: 1,
} as const;

/** Today's schema on a cluster: every table, then the log table and its views. */
export const clusterSchema = (cluster: string): string[] => [
  ...TABLES.flatMap((t) => clusterTableSql(t, cluster)),
  ...logTableStatements('{db}', { cluster }),
];

/** The migration ledger of a cluster: one replicated table every node shares (no shard in its path). */
export const clusterLedger = (db: string, cluster: string): string =>
  (clusterTableSql(SCHEMA_MIGRATIONS, cluster)[0] as string).replaceAll('{db}', db);
