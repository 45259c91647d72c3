import { WAKE_DETAILS, WAKE_LOG_COLUMNS, WAKES, wakeLogColumns } from './schema.js';

/**
 * How the write-ahead log's sealed segments reach storage (capture/wake-log.ts
 * writes their lines). A segment is one insert into the log table (`wake_log`,
 * whose columns are a line's fields), whose views fill the wakes and detail tables:
 * the embedded engine reads the file itself (it parses files many times faster than
 * inline data, and nothing is serialized twice), a ClickHouse server gets the file
 * streamed as the insert's body. An earlier version's segment takes one insert per
 * table (segmentInserts, or splitLog's cut for a server).
 */

/** The wakes table's columns, in order (a log line starts with them). */
export const WAKE_COLUMNS: readonly string[] = WAKES.columns.map((c) => c.name);
/** The detail table's columns, in order. */
export const DETAIL_COLUMNS: readonly string[] = WAKE_DETAILS.columns.map((c) => c.name);
/** The log table's columns: every field of a line, in order. */
export const LOG_COLUMN_NAMES: readonly string[] = WAKE_LOG_COLUMNS.map((c) => c.name);

const LOG_COLUMNS = LOG_COLUMN_NAMES.join(', ');
const fieldOf = (name: string): number => {
  const i = LOG_COLUMN_NAMES.indexOf(name);
  if (i === -1) throw new Error(`the wake log has no field ${name}`);
  return i;
};
/** Where each table's columns are among a line's fields. */
const WAKE_FIELDS = WAKE_COLUMNS.map(fieldOf);
const DETAIL_FIELDS = DETAIL_COLUMNS.map(fieldOf);
const HAS_DETAIL = fieldOf('has_detail');

/** A string as a ClickHouse string literal. */
const literal = (s: string): string => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

const STRUCTURE = WAKE_LOG_COLUMNS.map((c) => `${c.name} ${c.type}`).join(', ');
const WAKE_STRUCTURE = WAKE_LOG_COLUMNS.slice(0, WAKE_COLUMNS.length)
  .map((c) => `${c.name} ${c.type}`)
  .join(', ');

/**
 * The two INSERT … SELECT statements that load a sealed segment file into the
 * embedded engine: the wakes, and the detail of those that have one. One thread
 * and no parallel parsing, so a retried insert splits into the same blocks and
 * its deduplication token holds. Used for segments an earlier version wrote (see
 * capture/wake-log.ts's LOG_SEGMENT_TAG), whose inserts may have half happened
 * under these tokens.
 */
export function segmentInserts(db: string, file: string): { wakes: string; details: string } {
  const source = `FROM file(${literal(file)}, 'TabSeparated', ${literal(STRUCTURE)})`;
  // The wakes need only the line's first columns: the rest of each line is skipped,
  // not parsed (1.3 us less per wake with 1 KB bodies, 11.5 us with 32 KB).
  const head = `FROM file(${literal(file)}, 'TabSeparated', ${literal(WAKE_STRUCTURE)})`;
  return {
    wakes: `INSERT INTO ${db}.wakes (${WAKE_COLUMNS.join(', ')}) SELECT ${WAKE_COLUMNS.join(', ')} ${head} SETTINGS input_format_tsv_allow_variable_number_of_columns = 1`,
    details: `INSERT INTO ${db}.wake_details (${DETAIL_COLUMNS.join(', ')}) SELECT ${DETAIL_COLUMNS.join(', ')} ${source} WHERE has_detail = 1`,
  };
}

/**
 * The log's lines as a table (Null: it keeps nothing) and two views that hand each
 * line to the wakes and, when it has detail, to wake_details: a segment is then one
 * insert, its file read and parsed once (two inserts read it twice, and each insert
 * costs the engine about 3 ms however small). A new field of the log needs a
 * migration that alters this table and makes the views again, and so does a table
 * remade under them (a view points at its table's identity, not its name). On a
 * cluster (`cluster`) each is made on every node, the views writing through the
 * Distributed tables. `asOf`: as the migration of that version made them.
 */

/** Migration `version`'s remaking of the log table and its views with today's fields (nothing is kept in them). */
export const remakeLogTableStatements = (db: string): string[] => [
  `DROP VIEW IF EXISTS ${db}.wake_log_wakes`,
  `DROP VIEW IF EXISTS ${db}.wake_log_details`,
  `DROP TABLE IF EXISTS ${db}.wake_log`,
  ...logTableStatements(db),
];
export function logTableStatements(db: string, o: { cluster?: string; asOf?: number } = {}): string[] {
  const on = o.cluster === undefined ? '' : ` ON CLUSTER ${o.cluster}`;
  const columns = wakeLogColumns(o.asOf);
  const structure = columns.map((c) => `${c.name} ${c.type}`).join(', ');
  const wakes = WAKES.columns.filter((c) => columns.some((l) => l.name === c.name)).map((c) => c.name);
  return [
    `CREATE TABLE IF NOT EXISTS ${db}.wake_log${on} (${structure}) ENGINE = Null`,
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.wake_log_wakes${on} TO ${db}.wakes
    AS SELECT ${wakes.join(', ')} FROM ${db}.wake_log`,
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.wake_log_details${on} TO ${db}.wake_details
    AS SELECT ${DETAIL_COLUMNS.join(', ')} FROM ${db}.wake_log WHERE has_detail = 1`,
  ];
}

/** The one insert of a segment through the log table (the views deduplicate under its token). */
export const logSegmentInsert = (db: string, file: string): string =>
  `INSERT INTO ${db}.wake_log (${LOG_COLUMNS}) SELECT ${LOG_COLUMNS} FROM file(${literal(file)}, 'TabSeparated', ${literal(STRUCTURE)})`;

/** Settings of the insert through the log table: its views' blocks are deduplicated too. */
export const LOG_INSERT_SETTINGS = { deduplicate_blocks_in_dependent_materialized_views: 1 } as const;

export const SEGMENT_INSERT_SETTINGS = { max_threads: 1, input_format_parallel_parsing: 0 } as const;

/** A segment's lines cut into each table's TabSeparated rows (for a ClickHouse server, which cannot read our files). */
export function splitLog(text: string): { wakes: string; details: string } {
  let wakes = '';
  let details = '';
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end === -1) end = text.length;
    const c = text.slice(start, end).split('\t');
    start = end + 1;
    if (c.length !== LOG_COLUMN_NAMES.length) continue;
    wakes += `${WAKE_FIELDS.map((i) => c[i]).join('\t')}\n`;
    if (c[HAS_DETAIL] === '1') details += `${DETAIL_FIELDS.map((i) => c[i]).join('\t')}\n`;
  }
  return { wakes, details };
}
