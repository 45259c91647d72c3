import type { Store } from './client.js';
import { isUnknownSetting, queryRows } from './client.js';

/** The wake detail table's columns, key and retention (migration 9 made it; 12 remade it). */
export const detailTableSql = (db: string, name: string, settings: string): string =>
  `CREATE TABLE IF NOT EXISTS ${db}.${name} (
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
      ) ENGINE = MergeTree
      PARTITION BY toDate(captured_at)
      ORDER BY (environment, captured_at, id)
      TTL toDateTime(captured_at) + toIntervalDay(retention_days)
      SETTINGS ${settings}`;

/** A granule of detail holds at most 1 MB (the engine's default is 10 MB, and 8,192 rows). */
export const DETAIL_GRANULE = 'index_granularity_bytes = 1048576';

/** Detail parts up to 1 GiB are compact: a few files each, not two a column (migration 14). */
export const DETAIL_COMPACT_PARTS = 'min_bytes_for_wide_part = 1073741824';

const NEXT = 'wake_details_next';

/**
 * Remakes the detail table with 1 MB granules, a setting that cannot be altered:
 * a new table, every partition of the old one attached to it (hard links, no copy),
 * then the two exchanged and the old one dropped. Safe to run again after a crash
 * at any step: a table already remade is left as it is.
 */
export async function remakeDetailTable(store: Store): Promise<void> {
  const { client, db } = store;
  const run = (query: string) => client.command({ query });
  const [t] = await queryRows<{ q: string }>(
    store,
    'SELECT create_table_query AS q FROM system.tables WHERE database = {db:String} AND name = {t:String}',
    { db, t: 'wake_details' },
  );
  // Left over by a run cut short: before the exchange a half-filled new table, after it the old one.
  await run(`DROP TABLE IF EXISTS ${db}.${NEXT}`);
  if (t?.q.includes(DETAIL_GRANULE)) return;
  await run(
    detailTableSql(
      db,
      NEXT,
      `${DETAIL_GRANULE}, non_replicated_deduplication_window = 10000, ${DETAIL_COMPACT_PARTS},
        vertical_merge_algorithm_min_rows_to_activate = 1, vertical_merge_algorithm_min_columns_to_activate = 1`,
    ),
  );
  try {
    await run(`ALTER TABLE ${db}.${NEXT} MODIFY SETTING merge_selector_base = 20`);
  } catch (e) {
    // A server too old to know it: the default merges (see migration 11).
    if (!isUnknownSetting(e)) throw e;
  }
  const parts = await queryRows<{ p: string }>(
    store,
    'SELECT DISTINCT partition_id AS p FROM system.parts WHERE database = {db:String} AND table = {t:String} AND active',
    { db, t: 'wake_details' },
  );
  for (const { p } of parts) {
    // A partition id is the engine's own (digits of a date); checked before it is written into the statement.
    if (!/^[0-9A-Za-z_-]+$/.test(p)) throw new Error(`unexpected partition id in wake_details: ${p}`);
    await run(`ALTER TABLE ${db}.${NEXT} ATTACH PARTITION ID '${p}' FROM ${db}.wake_details`);
  }
  await run(`EXCHANGE TABLES ${db}.wake_details AND ${db}.${NEXT}`);
  await run(`DROP TABLE ${db}.${NEXT}`);
}
