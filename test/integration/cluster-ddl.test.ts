import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterLedger } from '../../src/store/cluster.js';
import { createTableSql } from '../../src/store/ddl.js';
import { clusterMigrations, MIGRATIONS, migrationsFor } from '../../src/store/migrations.js';
import { TABLES } from '../../src/store/schema.js';
import type { Store } from '../../src/store/store.js';
import { queryRows } from '../../src/store/store.js';
import { tempStore } from '../helpers/store.js';

/**
 * storage.cluster: no ClickHouse cluster can run here, so the DDL is checked as the
 * text each migration produces (a snapshot, read by a person once), for the shape a
 * cluster needs, and against the real single-server schema (same columns).
 */
const statements = clusterMigrations(MIGRATIONS, 'wg_cluster')[0]?.statements ?? [];

describe('the schema on a ClickHouse cluster', () => {
  it('is the text of the snapshot', async () => {
    const text = [clusterLedger('{db}', 'wg_cluster'), ...statements].map((s) => `${s.trim()};`).join('\n\n');
    await expect(`${text}\n`).toMatchFileSnapshot('__snapshots__/cluster-ddl.sql');
  });

  it('makes every table Replicated on the cluster with a Keeper path, a Distributed table in front, no non-replicated setting', () => {
    const locals = statements.filter((s) => /CREATE TABLE IF NOT EXISTS \{db\}\.\w+_local /.test(s));
    expect(locals.length).toBe(11);
    for (const s of locals) {
      const table = /\{db\}\.(\w+)_local/.exec(s)?.[1] as string;
      expect(s).toContain(' ON CLUSTER wg_cluster (');
      expect(s).toMatch(
        new RegExp(
          `ENGINE = Replicated(Replacing)?MergeTree\\('/clickhouse/tables/\\{shard\\}/wakegate/${table}', '\\{replica\\}'`,
        ),
      );
      expect(s).not.toContain('non_replicated_deduplication_window');
      const front = statements.find((x) => x.includes(`{db}.${table} ON CLUSTER wg_cluster AS {db}.${table}_local`));
      expect(front, table).toMatch(new RegExp(`ENGINE = Distributed\\(wg_cluster, \\{db\\}, ${table}_local, [^)]+\\)`));
    }
    // The log table and its views on every node, writing through the Distributed tables.
    expect(statements.filter((s) => s.includes('ON CLUSTER wg_cluster') && /wake_log/.test(s))).toHaveLength(3);
    expect(statements.join('\n')).toContain('TO {db}.wakes\n');
    // Single servers and ClickHouse Cloud keep the migrations they had.
    expect(migrationsFor({ cluster: null })).toBe(MIGRATIONS);
    expect(migrationsFor({ cluster: 'c' })[0]?.version).toBe(Math.max(...MIGRATIONS.map((m) => m.version)));
  });

  describe('against the single-server schema', () => {
    let t: { store: Store; cleanup: () => Promise<void> };
    beforeAll(async () => {
      t = await tempStore();
    });
    afterAll(() => t.cleanup());

    it('has the columns the migrations give a single server, table by table', async () => {
      const { store } = t;
      await store.client.command({ query: 'CREATE DATABASE IF NOT EXISTS cluster_check' });
      for (const sql of TABLES.map((t) => createTableSql(t)))
        await store.client.command({ query: sql.replaceAll('{db}', 'cluster_check') });
      const columns = (db: string) =>
        queryRows<{ table: string; name: string; type: string; default_expression: string }>(
          store,
          `SELECT table, name, type, default_expression FROM system.columns
           WHERE database = {db:String} AND table NOT IN ('schema_migrations', 'wake_log') AND table NOT LIKE 'wake_log_%'
           ORDER BY table, name`,
          { db },
        );
      const mine = await columns('cluster_check');
      expect(new Set(mine.map((c) => c.table)).size).toBe(11);
      expect(mine).toEqual(await columns(store.db));
    });
  });
});
