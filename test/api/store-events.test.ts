import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventTable, recordedAfterSql } from '../../src/store/events.js';
import { MIGRATIONS, migrate } from '../../src/store/migrations.js';
import type { Store } from '../../src/store/store.js';
import { queryRows } from '../../src/store/store.js';
import { applyDeliveryRetention } from '../../src/store/webhooks.js';
import { tempStore } from '../helpers/store.js';

describe('events table', () => {
  let store: Store;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ store, cleanup } = await tempStore());
  });
  afterAll(() => cleanup());

  it('has a TTL, like every table that grows with traffic', async () => {
    // Delivery retention is configured, so the gateway applies it at start.
    await applyDeliveryRetention(store, 30);
    for (const table of ['events', 'wakes', 'webhook_deliveries']) {
      const [row] = await queryRows<{ q: string }>(
        store,
        'SELECT create_table_query AS q FROM system.tables WHERE database = {db:String} AND name = {t:String}',
        { db: store.db, t: table },
      );
      expect(row?.q, table).toMatch(/\bTTL\b/);
    }
  });

  it('the fan-out poll reads by the sort key: a few granules of 1,000,000 events, not a full scan', async () => {
    const start = Date.UTC(2026, 10, 1);
    await store.client.command({
      query: `INSERT INTO ${store.db}.events (id, environment, type, created_at, data, recorded_at)
        SELECT concat('evt_', leftPad(toString(number), 12, '0')), 'production', 'wake.error',
               fromUnixTimestamp64Milli(toInt64({start:Int64} + number)), '{}',
               fromUnixTimestamp64Milli(toInt64({start:Int64} + number))
        FROM numbers(1000000)`,
      query_params: { start },
    });
    const near = start + 999_000;
    const params = { rt: near, rid: '', lim: 2000 };
    const plan = await queryRows<{ explain: string }>(
      store,
      `EXPLAIN indexes = 1 ${recordedAfterSql(store.db)}`,
      params,
    );
    const text = plan.map((r) => r.explain).join('\n');
    const pk = /PrimaryKey[\s\S]*?Granules: (\d+)\/(\d+)/.exec(text);
    expect(pk, text).not.toBeNull();
    const [read, total] = [Number(pk?.[1]), Number(pk?.[2])];
    expect(total).toBeGreaterThan(100);
    expect(read).toBeLessThanOrEqual(2);
    const t0 = performance.now();
    const page = await new EventTable(store).recordedAfter(near, '', 2000);
    const ms = performance.now() - t0;
    console.log(`poll over 1,000,000 events: ${read}/${total} granules, ${ms.toFixed(1)} ms`);
    expect(page).toHaveLength(1000);
    expect(page[0]?.id).toBe('evt_000000999000');
  }, 60_000);

  it('migration 7 keeps the events recorded before it', async () => {
    const v7 = MIGRATIONS.find((m) => m.version === 7);
    expect(v7).toBeDefined();
    // Replay the step over a table in the old layout, as an upgraded install has it.
    await store.client.command({ query: `DROP TABLE ${store.db}.events` });
    await store.client.command({
      query: `CREATE TABLE ${store.db}.events (id String, environment LowCardinality(String),
        type LowCardinality(String), created_at DateTime64(3, 'UTC'), data String,
        recorded_at DateTime64(3, 'UTC') DEFAULT now64(3)) ENGINE = ReplacingMergeTree ORDER BY (created_at, id)`,
    });
    await new EventTable(store).insert([
      { id: 'evt_old', type: 'key.revoked', environment: 'production', created_at: Date.now(), data: '{"a":1}' },
    ]);
    await store.client.command({ query: `DELETE FROM ${store.db}.schema_migrations WHERE version = 7` });
    expect(await migrate(store)).toEqual([7]);
    const rows = await new EventTable(store).list({ type: 'key.revoked' });
    expect(rows.map((r) => r.id)).toEqual(['evt_old']);
    const [row] = await queryRows<{ k: string }>(
      store,
      'SELECT sorting_key AS k FROM system.tables WHERE database = {db:String} AND name = {t:String}',
      { db: store.db, t: 'events' },
    );
    expect(row?.k).toBe('recorded_at, id');
  });
});
