/**
 * A table described once, and the statements made from the description: a single
 * server's CREATE TABLE (today's shape, or the shape a migration made at its
 * version), the columns and settings a later migration added, and a cluster's
 * Replicated table with a Distributed one in front. Pure text; the descriptions
 * themselves are in schema.ts.
 */

export interface Column {
  name: string;
  type: string;
  default?: string;
  codec?: string;
  /** The migration that added it to a table made before (absent: made with the table). */
  since?: number;
}

export interface Index {
  name: string;
  expr: string;
  type: string;
  granularity: number;
  /** The migration that added it to a table made before (absent: made with the table). */
  since?: number;
  /** The migration that dropped it (absent: the table has it today). */
  until?: number;
}

export interface Setting {
  name: string;
  value: string | number;
  /** The migration that set it on a table made before (absent: made with the table). */
  since?: number;
  /** For speed only: set apart from the CREATE, so an older server that refuses it still makes the table. */
  tuning?: boolean;
}

export interface TableSpec {
  name: string;
  columns: readonly Column[];
  indexes?: readonly Index[];
  engine: 'MergeTree' | 'ReplacingMergeTree';
  /** ReplacingMergeTree's version column. */
  version?: string;
  partitionBy?: string;
  orderBy: string;
  ttl?: string;
  settings?: readonly Setting[];
  /**
   * How a cluster spreads its rows over shards (rows of one id on one shard, so
   * ReplacingMergeTree's FINAL sees every version of a row); null: one replicated
   * table every node shares whole, with no Distributed table (the migration ledger).
   */
  shardKey: string | null;
}

/** Settings of a single server's tables that a Replicated table has its own way for. */
const NON_REPLICATED = new Set([
  // Replicated tables deduplicate inserts themselves (replicated_deduplication_window).
  'non_replicated_deduplication_window',
]);

export interface CreateOptions {
  /** The database, as text (`{db}` in migrations, replaced when they run). */
  db?: string;
  /** Another name than the description's (a table remade under a new name, then exchanged). */
  name?: string;
  /** The shape the table had after this migration (absent: today's). */
  asOf?: number;
  /** Leave out the tuning settings (they are set after, where an older server may refuse them). */
  tuning?: boolean;
}

const present = (since: number | undefined, asOf: number | undefined) =>
  asOf === undefined || since === undefined || since <= asOf;

export const columnSql = (c: Column): string =>
  `${c.name} ${c.type}${c.default === undefined ? '' : ` DEFAULT ${c.default}`}${c.codec ? ` CODEC(${c.codec})` : ''}`;

const indexSql = (i: Index): string => `INDEX ${i.name} ${i.expr} TYPE ${i.type} GRANULARITY ${i.granularity}`;

/** The columns and indexes of the table's body, as it is at `asOf`. */
export function tableBody(t: TableSpec, asOf?: number): string[] {
  const columns = t.columns.filter((c) => present(c.since, asOf)).map(columnSql);
  const indexes = (t.indexes ?? [])
    .filter((i) =>
      asOf === undefined ? i.until === undefined : present(i.since, asOf) && (i.until === undefined || i.until > asOf),
    )
    .map(indexSql);
  return [...columns, ...indexes];
}

const settingSql = (s: Setting): string => `${s.name} = ${s.value}`;

/** The engine clauses after ENGINE = …: partition, order, TTL, settings. */
function clauses(t: TableSpec, settings: readonly Setting[]): string {
  const out: string[] = [];
  if (t.partitionBy) out.push(`PARTITION BY ${t.partitionBy}`);
  out.push(`ORDER BY ${t.orderBy}`);
  if (t.ttl) out.push(`TTL ${t.ttl}`);
  if (settings.length > 0) out.push(`SETTINGS ${settings.map(settingSql).join(', ')}`);
  return out.map((c) => `\n  ${c}`).join('');
}

interface Create {
  /** `CREATE TABLE IF NOT EXISTS <db>.<name>[ ON CLUSTER <cluster>]` */
  head: string;
  engine: string;
  settings: readonly Setting[];
  asOf?: number;
}

const create = (t: TableSpec, c: Create): string =>
  `${c.head} (\n  ${tableBody(t, c.asOf).join(',\n  ')}\n) ENGINE = ${c.engine}${clauses(t, c.settings)}`;

/** A single server's CREATE TABLE. */
export function createTableSql(t: TableSpec, o: CreateOptions = {}): string {
  const settings = (t.settings ?? []).filter((s) => present(s.since, o.asOf) && (o.tuning !== false || !s.tuning));
  const engine = t.version ? `${t.engine}(${t.version})` : t.engine;
  const head = `CREATE TABLE IF NOT EXISTS ${o.db ?? '{db}'}.${o.name ?? t.name}`;
  return create(t, { head, engine, settings, asOf: o.asOf });
}

/** The migration `version`'s ALTERs that add the columns it added. */
export const addColumnsSql = (t: TableSpec, version: number): string[] =>
  t.columns
    .filter((c) => c.since === version)
    .map((c) => `ALTER TABLE {db}.${t.name} ADD COLUMN IF NOT EXISTS ${columnSql(c)}`);

/** The migration `version`'s ALTERs that add the indexes it added (parts written before have none). */
export const addIndexesSql = (t: TableSpec, version: number): string[] =>
  (t.indexes ?? [])
    .filter((i) => i.since === version)
    .map(
      (i) =>
        `ALTER TABLE {db}.${t.name} ADD INDEX IF NOT EXISTS ${i.name} ${i.expr} TYPE ${i.type} GRANULARITY ${i.granularity}`,
    );

/** The migration `version`'s ALTERs that drop the indexes it dropped. */
export const dropIndexesSql = (t: TableSpec, version: number): string[] =>
  (t.indexes ?? [])
    .filter((i) => i.until === version)
    .map((i) => `ALTER TABLE {db}.${t.name} DROP INDEX IF EXISTS ${i.name}`);

/** The migration `version`'s ALTER of the settings it set (on tables of its own, or none). */
export function modifySettingsSql(t: TableSpec, version: number): string[] {
  const set = (t.settings ?? []).filter((s) => s.since === version);
  return set.length === 0 ? [] : [`ALTER TABLE {db}.${t.name} MODIFY SETTING ${set.map(settingSql).join(', ')}`];
}

/** The tuning settings, as the ALTER that sets them after the CREATE. */
export function tuningSql(t: TableSpec, db: string, name = t.name): string[] {
  const set = (t.settings ?? []).filter((s) => s.tuning);
  return set.length === 0 ? [] : [`ALTER TABLE ${db}.${name} MODIFY SETTING ${set.map(settingSql).join(', ')}`];
}

export const localTable = (table: string): string => `${table}_local`;

/**
 * A cluster's table (today's shape): Replicated*MergeTree `<table>_local` on every
 * node (Keeper path /clickhouse/tables/{shard}/wakegate/<table>, replica {replica}),
 * with a Distributed table under the single server's name in front, so every query
 * and insert is the same text. A table with no shard key is one replicated table
 * every node shares whole.
 */
export function clusterTableSql(t: TableSpec, cluster: string): string[] {
  const settings = (t.settings ?? []).filter((s) => !NON_REPLICATED.has(s.name));
  const shared = t.shardKey === null;
  const path = `'/clickhouse/tables/${shared ? '' : '{shard}/'}wakegate/${t.name}', '{replica}'`;
  const engine = `Replicated${t.engine}(${path}${t.version ? `, ${t.version}` : ''})`;
  const name = shared ? t.name : localTable(t.name);
  const local = create(t, { head: `CREATE TABLE IF NOT EXISTS {db}.${name} ON CLUSTER ${cluster}`, engine, settings });
  if (shared) return [local];
  const front = `CREATE TABLE IF NOT EXISTS {db}.${t.name} ON CLUSTER ${cluster} AS {db}.${name}
  ENGINE = Distributed(${cluster}, {db}, ${name}, ${t.shardKey})`;
  return [local, front];
}
