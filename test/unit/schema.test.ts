import { describe, expect, it } from 'vitest';
import { LOG_FIELDS } from '../../src/capture/wake-log.js';
import { clusterTableSql, createTableSql, tableBody } from '../../src/store/ddl.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { SCHEMA_MIGRATIONS, TABLES, WAKE_LOG_COLUMNS } from '../../src/store/schema.js';

/** The body of a CREATE TABLE: its columns and indexes, one a line. */
const body = (sql: string): string[] => {
  const m = /\(\n([\s\S]*)\n\) ENGINE = /.exec(sql);
  if (!m) throw new Error(`no body in ${sql.slice(0, 80)}`);
  return (m[1] as string).split(',\n').map((l) => l.trim());
};

describe('the table descriptions', () => {
  it("make each table's single-server and cluster statements: the same body, the cluster's Replicated and ON CLUSTER", () => {
    expect(TABLES.length).toBe(11);
    for (const t of TABLES) {
      const single = createTableSql(t);
      const [local, front] = clusterTableSql(t, 'c1');
      expect(body(single), t.name).toEqual(tableBody(t));
      expect(body(local as string), t.name).toEqual(body(single));
      expect(single).toContain(`CREATE TABLE IF NOT EXISTS {db}.${t.name} (`);
      expect(single).toMatch(new RegExp(`ENGINE = ${t.engine}\\b`));
      expect(single).not.toContain('ON CLUSTER');
      expect(local).toContain(`CREATE TABLE IF NOT EXISTS {db}.${t.name}_local ON CLUSTER c1 (`);
      expect(local).toContain(
        `ENGINE = Replicated${t.engine}('/clickhouse/tables/{shard}/wakegate/${t.name}', '{replica}'`,
      );
      expect(local).not.toContain('non_replicated');
      for (const clause of [t.partitionBy, t.orderBy, t.ttl]) {
        if (clause === undefined) continue;
        expect(single).toContain(clause);
        expect(local).toContain(clause);
      }
      expect(front).toBe(
        `CREATE TABLE IF NOT EXISTS {db}.${t.name} ON CLUSTER c1 AS {db}.${t.name}_local\n  ENGINE = Distributed(c1, {db}, ${t.name}_local, ${t.shardKey})`,
      );
    }
  });

  it('make the ledger one replicated table every node shares, with no Distributed table', () => {
    const cluster = clusterTableSql(SCHEMA_MIGRATIONS, 'c1');
    expect(cluster).toHaveLength(1);
    expect(cluster[0]).toContain("ReplicatedMergeTree('/clickhouse/tables/wakegate/schema_migrations', '{replica}')");
    expect(body(cluster[0] as string)).toEqual(body(createTableSql(SCHEMA_MIGRATIONS)));
  });

  it('give a migration the shape the table had at its version', () => {
    const wakes = TABLES.find((t) => t.name === 'wakes');
    if (!wakes) throw new Error('no wakes table');
    const first = createTableSql(wakes, { asOf: 1 });
    expect(first).toContain('INDEX idx_path path TYPE ngrambf_v1(3, 4096, 2, 0) GRANULARITY 4');
    expect(first).not.toContain('path_truncated');
    expect(createTableSql(wakes)).not.toContain('idx_path');
    const steps = (v: number) => MIGRATIONS.find((m) => m.version === v)?.statements;
    expect(steps(5)).toEqual(['ALTER TABLE {db}.wakes DROP INDEX IF EXISTS idx_path']);
    expect(steps(6)).toEqual(['ALTER TABLE {db}.wakes ADD COLUMN IF NOT EXISTS path_truncated UInt8 DEFAULT 0']);
    expect(steps(11)).toEqual(['ALTER TABLE {db}.wake_details MODIFY SETTING merge_selector_base = 20']);
    expect(first).not.toContain('idx_trace');
    expect(createTableSql(wakes, { asOf: 15 })).not.toContain('trace_id');
    expect(createTableSql(wakes)).toContain('INDEX idx_trace trace_id TYPE bloom_filter GRANULARITY 4');
    const v16 = steps(16) ?? [];
    expect(v16).toContain(
      "ALTER TABLE {db}.wakes ADD COLUMN IF NOT EXISTS protocol LowCardinality(String) DEFAULT 'http/1.1'",
    );
    expect(v16).toContain(
      'ALTER TABLE {db}.wakes ADD INDEX IF NOT EXISTS idx_trace trace_id TYPE bloom_filter GRANULARITY 4',
    );
    // The log table as migration 13 made it has none of 16's fields; 16 makes it again with them.
    expect(steps(13)?.join('\n')).not.toContain('trace_id');
    expect(v16.find((q) => q.includes('wake_log (') && q.startsWith('CREATE TABLE'))).toContain('trace_id String');
    expect(steps(17)).toEqual(["ALTER TABLE {db}.api_keys ADD COLUMN IF NOT EXISTS tls_fingerprint String DEFAULT ''"]);
    expect(steps(18)).toEqual(["ALTER TABLE {db}.api_keys ADD COLUMN IF NOT EXISTS bucket String DEFAULT ''"]);
    expect(steps(19)?.[1]).toContain('INSERT INTO {db}.key_revocations');
    expect(MIGRATIONS.map((m) => m.version)).toEqual([
      1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
    ]);
  });

  it("give the log table a column for each field of capture's log line, in order", () => {
    expect(WAKE_LOG_COLUMNS.map((c) => c.name)).toEqual(LOG_FIELDS);
  });
});
