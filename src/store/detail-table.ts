import { createTableSql, tuningSql } from './ddl.js';
import { WAKE_DETAILS } from './schema.js';
import { isUnknownSetting, queryRows, type Store } from './store.js';

const granule = WAKE_DETAILS.settings?.find((s) => s.name === 'index_granularity_bytes');
/** The setting that tells a remade detail table (1 MB granules) from the first layout. */
export const DETAIL_GRANULE = `${granule?.name} = ${granule?.value}`;

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
  // Today's table, its tuning settings set after.
  await run(createTableSql(WAKE_DETAILS, { db, name: NEXT, tuning: false }));
  for (const sql of tuningSql(WAKE_DETAILS, db, NEXT)) {
    try {
      await run(sql);
    } catch (e) {
      // A server too old to know it: the default merges (see migration 11).
      if (!isUnknownSetting(e)) throw e;
    }
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
