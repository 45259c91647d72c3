import type { ClickHouseClient } from '@clickhouse/client';
import type { TableChanges } from './changes.js';

/**
 * The handle every table module is handed, and the helpers they share. A leaf:
 * it imports nothing of the store's, so the table modules, the migrations and the
 * client that opens a store never import one another in a circle.
 */

export interface Store {
  client: ClickHouseClient;
  /** Database name, validated as a plain identifier by the config schema. */
  db: string;
  /** storage.cluster: tables are Replicated behind Distributed ones (store/cluster.ts). */
  cluster: string | null;
  /** The engine runs in this process and can read files under DATA_DIR (the log's segments) itself. */
  readsFiles: boolean;
  /**
   * Writes to its tables, told by the code that makes them, when only this process
   * writes the store (the embedded engine; shared by every store this process opens on
   * the same directory). null for a ClickHouse server, which other instances write too.
   */
  changes: TableChanges | null;
  /**
   * Inserts bytes already in `format` into `table` of the database, as one
   * idempotent insert under `token`. The embedded engine takes the Buffer as it
   * is (no copy, no string, parsed off the event loop); a server gets it as the
   * request body.
   */
  insertBytes(
    table: string,
    columns: readonly string[],
    format: RawFormat,
    bytes: Buffer,
    token: string,
  ): Promise<void>;
  close(): Promise<void>;
}

export type RawFormat = 'JSONCompactEachRow' | 'TabSeparated';

/** Rows of a JSONEachRow query. */
export async function queryRows<T>(
  store: Store,
  query: string,
  params: Record<string, unknown> = {},
  abortSignal?: AbortSignal,
): Promise<T[]> {
  const rs = await store.client.query({
    query,
    query_params: params,
    format: 'JSONEachRow',
    ...(abortSignal ? { abort_signal: abortSignal } : {}),
  });
  return rs.json<T>();
}

/** The engine refused a setting it does not know (an older ClickHouse server). */
export const isUnknownSetting = (e: unknown): boolean => /UNKNOWN_SETTING|Unknown setting/i.test(String(e));
