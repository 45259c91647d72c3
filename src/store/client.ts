import { join } from 'node:path';
import { type ClickHouseClient, createClient } from '@clickhouse/client';
import type { Config } from '../config/index.js';
import { privateDir, privateUmask } from './private-dir.js';

export interface Store {
  client: ClickHouseClient;
  /** Database name, validated as a plain identifier by the config schema. */
  db: string;
  close(): Promise<void>;
}

/**
 * One `@clickhouse/client` for everything: chDB's embedded engine under
 * DATA_DIR by default, a ClickHouse server when `clickhouse_url` is set.
 */
export async function openStore(storage: Config['storage']): Promise<Store> {
  const db = storage.clickhouse_database;
  let client: ClickHouseClient;
  if (storage.clickhouse_url) {
    client = createClient({
      url: storage.clickhouse_url,
      username: storage.clickhouse_user ?? 'default',
      password: storage.clickhouse_password ?? '',
      request_timeout: 10_000,
      max_open_connections: 16,
      clickhouse_settings: { date_time_input_format: 'best_effort' },
    });
  } else {
    // Imported lazily: the native engine is only loaded when it is used.
    const { createChdbConnection } = await import('chdb/connection');
    const path = join(storage.data_dir, 'clickhouse');
    privateUmask();
    privateDir(storage.data_dir);
    privateDir(path);
    client = createClient({ connection: createChdbConnection({ path }) } as Parameters<typeof createClient>[0]);
  }
  return {
    client,
    db,
    close: () => client.close(),
  };
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
