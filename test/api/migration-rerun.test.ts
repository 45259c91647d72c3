import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS, migrate } from '../../src/store/migrations.js';
import type { Store } from '../../src/store/store.js';
import { tempStore } from '../helpers/store.js';

/**
 * A host may kill the gateway between any two statements of a migration: the next
 * start must still migrate, with no row lost. Migration 7 remakes the events table;
 * each state a kill can leave (this version's steps, and an earlier version's, which
 * dropped `events` before renaming `events_v7`) is built in a database of its own.
 */
let base: Store;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ store: base, cleanup } = await tempStore());
}, 60_000);
afterAll(async () => cleanup?.(), 60_000);

/** A database migrated up to 6, holding one event, then `done`: the statements of migration 7 a kill cut after. */
async function cutAt(db: string, done: string[]): Promise<Store> {
  const store: Store = { ...base, db };
  await migrate(
    store,
    MIGRATIONS.filter((m) => m.version < 7),
  );
  await base.client.command({
    query: `INSERT INTO ${db}.events (id, environment, type, created_at, data) VALUES ('evt_kept', 'production', 'wake.error', now64(3), '{}')`,
  });
  for (const sql of done) await base.client.command({ query: sql.replaceAll('{db}', db) });
  return store;
}

const v7 = `CREATE TABLE {db}.events_v7 (id String, environment LowCardinality(String), type LowCardinality(String),
  created_at DateTime64(3, 'UTC'), data String, recorded_at DateTime64(3, 'UTC') DEFAULT now64(3))
  ENGINE = ReplacingMergeTree ORDER BY (recorded_at, id)`;
const copy = 'INSERT INTO {db}.events_v7 SELECT * FROM {db}.events';

describe('migration 7 after a kill between its statements', () => {
  const cases: [string, string[]][] = [
    ['nothing done', []],
    ['events_v7 made', [v7]],
    ['events_v7 made and filled', [v7, copy]],
    ['an earlier version: events dropped, events_v7 not yet renamed', [v7, copy, 'DROP TABLE {db}.events']],
    [
      'this version: the tables exchanged, the old one not yet dropped',
      [v7, copy, 'EXCHANGE TABLES {db}.events AND {db}.events_v7'],
    ],
  ];
  cases.forEach(([name, cut], i) => {
    it(`${name}: the next start migrates, and the event is kept`, async () => {
      const store = await cutAt(`cut${i}`, cut);
      await migrate(store);
      const rs = await base.client.query({
        query: `SELECT id FROM ${store.db}.events FINAL`,
        format: 'JSONEachRow',
      });
      expect(await rs.json()).toEqual([{ id: 'evt_kept' }]);
      const left = await base.client.query({
        query: "SELECT name FROM system.tables WHERE database = {db:String} AND name = 'events_v7'",
        query_params: { db: store.db },
        format: 'JSONEachRow',
      });
      expect(await left.json()).toEqual([]);
    }, 60_000);
  });
});
