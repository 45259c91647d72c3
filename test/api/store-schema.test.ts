import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINE_ARGS } from '../../src/store/client.js';
import type { Store } from '../../src/store/store.js';
import { queryRows } from '../../src/store/store.js';
import { tempStore } from '../helpers/store.js';

/**
 * The tables a fresh single-node store has after every migration, as the engine
 * shows them. The snapshot was taken before the schema was written as table
 * descriptions: it guards that the migrations still make exactly those tables.
 */
describe('the single-node schema', () => {
  let t: { store: Store; cleanup: () => Promise<void> };
  beforeAll(async () => {
    t = await tempStore();
  });
  afterAll(() => t.cleanup());

  it('is what the migrations made before the tables were described once', async () => {
    const { store } = t;
    const rows = await queryRows<{ name: string; q: string }>(
      store,
      'SELECT name, create_table_query AS q FROM system.tables WHERE database = {db:String} ORDER BY name',
      { db: store.db },
    );
    const text = rows.map((r) => `${r.q.replaceAll(`${store.db}.`, '{db}.')};`).join('\n\n');
    await expect(`${text}\n`).toMatchFileSnapshot('__snapshots__/single-node-schema.sql');
  });

  it('runs the embedded engine with its start settings (the memory worker once a second)', async () => {
    const rows = await queryRows<{ name: string; value: string }>(
      t.store,
      'SELECT name, value FROM system.server_settings WHERE changed AND name = {n:String}',
      { n: 'memory_worker_period_ms' },
    );
    expect(rows).toEqual([{ name: 'memory_worker_period_ms', value: '1000' }]);
    expect(ENGINE_ARGS).toContain('--memory_worker_period_ms=1000');
  });
});
