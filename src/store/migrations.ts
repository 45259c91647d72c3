import { clusterLedger, clusterSchema } from './cluster.js';
import { addColumnsSql, addIndexesSql, createTableSql, dropIndexesSql, modifySettingsSql } from './ddl.js';
import { remakeDetailTable } from './detail-table.js';
import { type LockOptions, takeMigrationLock } from './migration-lock.js';
import {
  API_KEYS,
  EVENTS,
  KEY_REVOCATIONS,
  KEY_USAGE,
  SCHEMA_MIGRATIONS,
  WAKE_DETAILS,
  WAKES,
  WEBHOOK_ATTEMPTS,
  WEBHOOK_DELIVERIES,
  WEBHOOK_ENDPOINT_DELETIONS,
  WEBHOOK_ENDPOINTS,
  WEBHOOK_FANOUT_CURSOR,
} from './schema.js';
import { isUnknownSetting, queryRows, type Store } from './store.js';
import { logTableStatements, remakeLogTableStatements } from './wake-log-table.js';

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

const EVENT_COLUMNS = EVENTS.columns.map((c) => c.name).join(', ');

/**
 * The schema, in order, each step made from the table descriptions (schema.ts) as
 * the table was at that version. What a migration does never changes once released:
 * a change to a table is a new migration, and the description marks what it added
 * (`since`) or dropped (`until`).
 */
export const MIGRATIONS: Migration[] = [
  { version: 1, name: 'wakes', statements: [createTableSql(WAKES, { asOf: 1 })] },
  {
    version: 2,
    name: 'api_keys',
    statements: [createTableSql(API_KEYS, { asOf: 2 }), createTableSql(KEY_USAGE, { asOf: 2 })],
  },
  {
    version: 3,
    name: 'events',
    // The events table's first layout, sorted by creation time and never expiring;
    // migration 7 replaced it (schema.ts describes today's), so it stays as released.
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
      createTableSql(WEBHOOK_ENDPOINTS, { asOf: 4 }),
      createTableSql(WEBHOOK_DELIVERIES, { asOf: 4 }),
      createTableSql(WEBHOOK_FANOUT_CURSOR, { asOf: 4 }),
    ],
  },
  {
    version: 5,
    name: 'wakes_drop_path_ngram_index',
    // The ngram index on path cost about a third of the CPU of every insert and merge
    // (measured: bench/RESULTS.md) and cannot serve the anchored regex a path template
    // becomes, so it goes.
    statements: dropIndexesSql(WAKES, 5),
  },
  {
    version: 6,
    name: 'wakes_path_truncated',
    // Stored paths are capped at 2 KB; the wake says when its path was cut.
    statements: addColumnsSql(WAKES, 6),
  },
  {
    version: 7,
    name: 'events_by_recorded_at_with_ttl',
    // The fan-out polls by recording order several times a second; the table is
    // now sorted by it (so a poll reads only the newest granules, not the whole
    // table) and events expire like the deliveries made from them.
    statements: [],
    run: remakeEventsTable,
  },
  {
    version: 8,
    name: 'webhook_secret_rotation_and_attempts',
    // rotate-secret keeps the previous secret signing alongside for 24 h; every
    // attempt of a delivery is kept (a delivery row holds only its latest state).
    statements: [...addColumnsSql(WEBHOOK_ENDPOINTS, 8), createTableSql(WEBHOOK_ATTEMPTS, { asOf: 8 })],
  },
  {
    version: 9,
    name: 'wake_details_and_replays',
    // The exchange a wake keeps (redacted), in its own compressed table read only by
    // GET /v2/wakes/{id}, with the wake's retention; a replay's wake names the original.
    statements: [...addColumnsSql(WAKES, 9), createTableSql(WAKE_DETAILS, { asOf: 9 })],
  },
  {
    version: 10,
    name: 'wake_details_vertical_merges',
    // Detail rows are wide (bodies up to max_body_bytes): merging them a column at a
    // time, not all columns at once, lowered the engine's peak memory by 60 to 190 MB
    // with 32 KB bodies (24,000 rows inserted alone: peak 857-955 -> 765-794 MB; the
    // gateway under load: 1,008-1,074 -> 927-971 MB), at the same CPU.
    statements: modifySettingsSql(WAKE_DETAILS, 10),
  },
  {
    version: 11,
    name: 'wake_details_fewer_merges',
    // Detail rows are read one wake at a time, never scanned, so the table can keep
    // more parts and merge each row fewer times: base 20 (default 5) halved the
    // merge threads' CPU per row (32 KB bodies: 23.2 -> 11.8 us; 1 KB: 3.5 -> 1.8 us;
    // 60,000 rows in 30 inserts left 14 parts instead of 5).
    statements: modifySettingsSql(WAKE_DETAILS, 11),
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
    statements: logTableStatements('{db}', { asOf: 13 }),
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
    statements: modifySettingsSql(WAKE_DETAILS, 14),
    tuning: true,
  },
  {
    version: 15,
    name: 'api_keys_bootstrap',
    // Marks the bootstrap admin key, so a start with another WAKEGATE_ADMIN_KEY knows
    // which key the new one replaces (one bootstrap admin key at a time).
    statements: addColumnsSql(API_KEYS, 15),
  },
  {
    version: 16,
    name: 'wakes_protocol_tls_trace',
    // The client's protocol (http/1.1, h2), its certificate's subject and fingerprint
    // (mTLS), and the request's W3C trace context, with an index that finds a trace's
    // wakes. The log table holds nothing (Null): it and its views are made again with
    // the new fields (a running version's segment is rewritten before it is inserted).
    statements: [...addColumnsSql(WAKES, 16), ...addIndexesSql(WAKES, 16), ...remakeLogTableStatements('{db}')],
  },
  {
    version: 17,
    name: 'api_keys_tls_fingerprint',
    // A key a client certificate names (routes with auth: mtls), by the certificate's SHA-256.
    statements: addColumnsSql(API_KEYS, 17),
  },
  {
    version: 18,
    name: 'api_keys_bucket',
    // A replacement key spends from the rate-limit bucket of the first key of its chain.
    statements: addColumnsSql(API_KEYS, 18),
  },
  {
    version: 19,
    name: 'key_revocations',
    // Revocations kept apart from the key's versions, so a later version written from an
    // older read cannot undo one. Every version stored so far that carries a revocation
    // is copied (a run again after a kill copies some twice, which changes no minimum).
    statements: [
      createTableSql(KEY_REVOCATIONS, { asOf: 19 }),
      `INSERT INTO {db}.key_revocations (id, revoke_at, revoked_at, written_at)
        SELECT id, revoke_at, revoked_at, updated_at FROM {db}.api_keys
        WHERE revoke_at IS NOT NULL OR revoked_at IS NOT NULL`,
    ],
  },
  {
    version: 20,
    name: 'webhook_endpoint_deletions',
    // Deletes kept apart from the endpoint's versions, as revocations in 19; every deleted
    // version stored so far is copied.
    statements: [
      createTableSql(WEBHOOK_ENDPOINT_DELETIONS, { asOf: 20 }),
      `INSERT INTO {db}.webhook_endpoint_deletions (id, deleted_at, written_at)
        SELECT id, coalesce(disabled_at, updated_at), updated_at FROM {db}.webhook_endpoints
        WHERE status = 'deleted'`,
    ],
  },
];

/** Migration 7, safe to run again after a kill at any step (as remakeDetailTable). */
async function remakeEventsTable(store: Store): Promise<void> {
  const { client, db } = store;
  const run = (query: string) => client.command({ query });
  const exists = async (t: string) =>
    (
      await queryRows<{ n: string }>(
        store,
        'SELECT count() AS n FROM system.tables WHERE database = {db:String} AND name = {t:String}',
        { db, t },
      )
    ).some((r) => Number(r.n) > 0);
  // Cut after the DROP: the new table holds every row; only the rename is left.
  if (!(await exists('events')) && (await exists('events_v7'))) {
    await run(`RENAME TABLE ${db}.events_v7 TO ${db}.events`);
    return;
  }
  await run(`DROP TABLE IF EXISTS ${db}.events_v7`);
  await run(createTableSql(EVENTS, { asOf: 7, name: 'events_v7' }).replaceAll('{db}', db));
  await run(`INSERT INTO ${db}.events_v7 (${EVENT_COLUMNS}) SELECT ${EVENT_COLUMNS} FROM ${db}.events`);
  await run(`EXCHANGE TABLES ${db}.events AND ${db}.events_v7`);
  await run(`DROP TABLE ${db}.events_v7`);
}

const ledger = (db: string) => createTableSql(SCHEMA_MIGRATIONS, { db });

/** The migrations of a cluster: today's schema in one step, at the latest single-server version. */
export function clusterMigrations(history: readonly Migration[], cluster: string): Migration[] {
  const latest = Math.max(...history.map((m) => m.version));
  return [{ version: latest, name: `cluster_schema_${latest}`, statements: clusterSchema(cluster) }];
}

/** The migrations a store gets: one at a time on a single server, today's schema at once on a cluster. */
export const migrationsFor = (store: Pick<Store, 'cluster'>): Migration[] =>
  store.cluster === null ? MIGRATIONS : clusterMigrations(MIGRATIONS, store.cluster);

/**
 * Applies every migration not yet recorded, in order, and records each. Returns the
 * applied versions. On a server that others may share, instances take turns
 * (migration-lock.ts): whoever waited finds the versions recorded and applies none.
 */
export async function migrate(
  store: Store,
  migrations: Migration[] = migrationsFor(store),
  o: LockOptions = {},
): Promise<number[]> {
  const { client, db, cluster } = store;
  const onCluster = cluster === null ? '' : ` ON CLUSTER ${cluster}`;
  await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${db}${onCluster}` });
  await client.command({ query: cluster === null ? ledger(db) : clusterLedger(db, cluster) });
  const todo = async () => {
    const rs = await client.query({ query: `SELECT version FROM ${db}.schema_migrations`, format: 'JSONEachRow' });
    const done = new Set((await rs.json<{ version: number }>()).map((r) => Number(r.version)));
    return [...migrations].sort((a, b) => a.version - b.version).filter((m) => !done.has(m.version));
  };
  if ((await todo()).length === 0) return [];
  // The embedded engine is this process's alone (its data directory is locked).
  const lock = store.readsFiles ? null : await takeMigrationLock(store, o);
  const applied: number[] = [];
  try {
    for (const m of await todo()) {
      await lock?.check();
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
  } finally {
    await lock?.release();
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
