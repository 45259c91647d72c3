import { join } from 'node:path';
import { Readable } from 'node:stream';
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import type { Config } from '../config/index.js';
import { CLUSTER_SETTINGS } from './cluster.js';
import { privateDir, privateUmask } from './private-dir.js';

export interface Store {
  client: ClickHouseClient;
  /** Database name, validated as a plain identifier by the config schema. */
  db: string;
  /** storage.cluster: tables are Replicated behind Distributed ones (store/cluster.ts). */
  cluster: string | null;
  /** The engine runs in this process and can read files under DATA_DIR (the log's segments) itself. */
  readsFiles: boolean;
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

type RawInsert = (p: {
  table: string;
  columns: string[];
  format: RawFormat;
  values: Buffer;
  settings: Record<string, string | number>;
}) => Promise<unknown>;

/**
 * One `@clickhouse/client` for everything: chDB's embedded engine under
 * DATA_DIR by default, a ClickHouse server when `clickhouse_url` is set.
 */
export async function openStore(storage: Config['storage']): Promise<Store> {
  const db = storage.clickhouse_database;
  let client: ClickHouseClient;
  let raw: RawInsert | null = null;
  if (storage.clickhouse_url) {
    client = ownTokens(
      createClient({
        url: storage.clickhouse_url,
        username: storage.clickhouse_user ?? 'default',
        password: storage.clickhouse_password ?? '',
        request_timeout: 10_000,
        max_open_connections: 16,
        clickhouse_settings: {
          date_time_input_format: 'best_effort',
          ...(storage.cluster === null ? {} : CLUSTER_SETTINGS),
        },
        // The client's own log lines are not the gateway's: every failure reaches the caller, which says it once.
        log: { level: ClickHouseLogLevel.OFF },
      }),
    );
  } else {
    // Imported lazily: the native engine is only loaded when it is used.
    const { createChdbConnection } = await import('chdb/connection');
    const path = join(storage.data_dir, 'clickhouse');
    privateUmask();
    privateDir(storage.data_dir);
    privateDir(path);
    const connection = createChdbConnection({ path });
    raw = (p) => connection.chdb.rawInsert(p);
    client = ownTokens(createClient({ connection } as Parameters<typeof createClient>[0]));
  }
  return {
    client,
    db,
    cluster: storage.cluster,
    readsFiles: raw !== null,
    async insertBytes(table, columns, format, bytes, token) {
      if (bytes.length === 0) return;
      const settings = { insert_deduplication_token: token, insert_deduplicate: 1 as const };
      if (raw) {
        await raw({ table: `${db}.${table}`, columns: [...columns], format, values: bytes, settings });
        return;
      }
      await client.insert({
        table: `${db}.${table}`,
        columns: [...columns] as [string, ...string[]],
        format,
        values: Readable.from([bytes], { objectMode: false }),
        clickhouse_settings: settings,
      });
    },
    close: () => client.close(),
  };
}

/**
 * chDB's connection SETs a query's settings on its one engine session, where they
 * stay for every later query: an insert given no deduplication token would carry
 * the last one given, and a batch could be dropped as a duplicate of another. Every
 * insert and command names its own token, or none (harmless to a ClickHouse server,
 * which takes settings per request; the HTTP interface over chDB the tests use keeps
 * them like chDB does).
 */
function ownTokens(client: ClickHouseClient): ClickHouseClient {
  const own = <P extends { clickhouse_settings?: Record<string, unknown> }>(p: P): P => ({
    ...p,
    clickhouse_settings: { insert_deduplication_token: '', ...p.clickhouse_settings },
  });
  const insert = client.insert.bind(client);
  const command = client.command.bind(client);
  client.insert = ((p: Parameters<typeof insert>[0]) => insert(own(p))) as typeof client.insert;
  client.command = (p) => command(own(p));
  return client;
}

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
