import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Wake } from '../../src/capture/wake.js';
import { LOG_SEGMENT_TAG, wakeLogCodec } from '../../src/capture/wake-log.js';
import { newWakeId } from '../../src/ids.js';
import { createTableSql } from '../../src/store/ddl.js';
import { DETAIL_GRANULE } from '../../src/store/detail-table.js';
import { MIGRATIONS, migrate, migrationsApplied } from '../../src/store/migrations.js';
import { WAKE_DETAILS } from '../../src/store/schema.js';
import type { Store } from '../../src/store/store.js';
import { WakeInserter, WakeQuerier } from '../../src/store/wakes.js';
import { tempStore } from '../helpers/store.js';

const base = Date.UTC(2026, 10, 20, 12, 0, 0);
function wake(i: number, over: Partial<Wake> = {}): Wake {
  const t = over.captured_at ?? base + i;
  return {
    id: newWakeId(t),
    method: 'GET',
    path: `/v2/payments/p${i}`,
    route: 'payments',
    status: 200,
    latency_ms: i,
    consumer: 'c',
    key_id: 'key_x',
    environment: 'production',
    region: 'local',
    captured_at: t,
    request_bytes: 0,
    response_bytes: 10,
    client_ip: '127.0.0.1',
    user_agent: 'test',
    ...over,
  };
}

describe('wakes table', () => {
  let store: Store;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ store, cleanup } = await tempStore());
  });
  afterAll(() => cleanup());

  it('records migrations and applies them once', async () => {
    expect(await migrationsApplied(store)).toBe(true);
    expect(await migrate(store)).toEqual([]);
    const rs = await store.client.query({
      query: `SELECT version FROM ${store.db}.schema_migrations`,
      format: 'JSONEachRow',
    });
    expect((await rs.json()).length).toBe(MIGRATIONS.length);
  });

  it('merges detail rows fewer times; a speed-only setting an engine does not know is passed over, any other failure is not', async () => {
    const rs = await store.client.query({
      query: 'SELECT create_table_query AS q FROM system.tables WHERE database = {db:String} AND name = {t:String}',
      query_params: { db: store.db, t: 'wake_details' },
      format: 'JSONEachRow',
    });
    const [row] = await rs.json<{ q: string }>();
    expect(row?.q).toContain('merge_selector_base = 20');
    const unknown = 'ALTER TABLE {db}.wake_details MODIFY SETTING no_such_setting_anywhere = 1';
    expect(await migrate(store, [{ version: 901, name: 'tuning', statements: [unknown], tuning: true }])).toEqual([
      901,
    ]);
    await expect(migrate(store, [{ version: 902, name: 'schema', statements: [unknown] }])).rejects.toThrow(/setting/i);
    await expect(
      migrate(store, [
        {
          version: 903,
          name: 'tuning',
          statements: ['ALTER TABLE {db}.no_such_table MODIFY SETTING merge_selector_base = 20'],
          tuning: true,
        },
      ]),
    ).rejects.toThrow();
    await store.client.command({ query: `DELETE FROM ${store.db}.schema_migrations WHERE version >= 900` });
  });

  it('remakes the detail table with 1 MB granules, keeping every row, and can run again after a crash at any step', async () => {
    const db = store.db;
    const tableSql = async (name: string) => {
      const rs = await store.client.query({
        query: 'SELECT create_table_query AS q FROM system.tables WHERE database = {db:String} AND name = {t:String}',
        query_params: { db, t: name },
        format: 'JSONEachRow',
      });
      return (await rs.json<{ q: string }>())[0]?.q ?? null;
    };
    const fresh = await tableSql('wake_details');
    expect(fresh).toContain(DETAIL_GRANULE);
    expect(fresh).toContain('merge_selector_base = 20');
    expect(await tableSql('wake_details_next')).toBeNull();
    // An install from before: the table in its first layout, with rows on two days.
    await store.client.command({ query: `DROP TABLE ${db}.wake_details` });
    await store.client.command({
      query: createTableSql(WAKE_DETAILS, { db, asOf: 9 }),
    });
    const days = [Date.UTC(2026, 10, 20, 12), Date.UTC(2026, 10, 21, 12), Date.UTC(2026, 10, 21, 13)];
    await store.client.insert({
      table: `${db}.wake_details`,
      values: days.map((t, i) => ({
        id: `wk_remake_${i}`,
        environment: 'remake',
        captured_at: t,
        query: `?i=${i}`,
        response_body: `{"i":${i}}`,
        retention_days: 3650,
      })),
      format: 'JSONEachRow',
    });
    const rows = async () => {
      const rs = await store.client.query({
        query: `SELECT id, query, response_body FROM ${db}.wake_details WHERE environment = 'remake' ORDER BY id`,
        format: 'JSONEachRow',
      });
      return rs.json();
    };
    const before = await rows();
    expect(before).toHaveLength(3);
    const forget = () => store.client.command({ query: `DELETE FROM ${db}.schema_migrations WHERE version = 12` });
    await forget();
    expect(await migrate(store)).toEqual([12]);
    expect(await tableSql('wake_details')).toContain(DETAIL_GRANULE);
    expect(await tableSql('wake_details_next')).toBeNull();
    expect(await rows()).toEqual(before);
    // A crash after the exchange, before the migration was recorded: the old table is left over.
    await store.client.command({
      query: createTableSql(WAKE_DETAILS, { db, name: 'wake_details_next', asOf: 9 }),
    });
    await forget();
    expect(await migrate(store)).toEqual([12]);
    expect(await tableSql('wake_details_next')).toBeNull();
    expect(await rows()).toEqual(before);
    // A crash before the exchange (the new table half filled): it is made again from the old one.
    await store.client.command({ query: `DROP TABLE ${db}.wake_details` });
    await store.client.command({
      query: createTableSql(WAKE_DETAILS, { db, asOf: 9 }),
    });
    await store.client.insert({
      table: `${db}.wake_details`,
      values: [
        {
          id: 'wk_remake_0',
          environment: 'remake',
          captured_at: days[0],
          query: '?i=0',
          response_body: '{"i":0}',
          retention_days: 3650,
        },
      ],
      format: 'JSONEachRow',
    });
    await store.client.command({
      query: createTableSql(WAKE_DETAILS, { db, name: 'wake_details_next', asOf: 12 }),
    });
    await store.client.command({
      query: `INSERT INTO ${db}.wake_details_next SELECT * FROM ${db}.wake_details`,
    });
    await forget();
    expect(await migrate(store)).toEqual([12]);
    expect(await rows()).toEqual(before.slice(0, 1));
    expect(await migrate(store)).toEqual([]);
  });

  it('writes a batch of large detail as a compact part (a few files, not two a column)', async () => {
    const ins = new WakeInserter(
      store,
      wakeLogCodec(() => 30),
    );
    const body = Buffer.from(JSON.stringify({ data: 'x'.repeat(32_000) }));
    const batch = Array.from({ length: 400 }, (_, i) =>
      wake(i, {
        environment: 'compact',
        detail: {
          query: '',
          request_headers: [],
          response_headers: [],
          request_body: null,
          response_body: { data: body, bytes: body.length, truncated: false, encoding: 'utf8' },
          diff: null,
        },
      }),
    );
    // 12.8 MB of bodies: past the engine's default of 10 MB for a "wide" part.
    await ins.insert(batch, 'compact-parts');
    const rs = await store.client.query({
      query: `SELECT part_type, rows FROM system.parts WHERE database = {db:String} AND table = 'wake_details' AND active
        AND name IN (SELECT DISTINCT _part FROM ${store.db}.wake_details WHERE environment = {env:String})`,
      query_params: { db: store.db, env: 'compact' },
      format: 'JSONEachRow',
    });
    expect(await rs.json()).toEqual([{ part_type: 'Compact', rows: 400 }]);
  });

  it('regression: an insert without a deduplication token does not carry the last one given (chDB keeps settings on its session)', async () => {
    const q = new WakeQuerier(store);
    await store.client.command({ query: 'SELECT 1', clickhouse_settings: { insert_deduplication_token: 'stale' } });
    for (const i of [1, 2]) {
      await store.client.insert({
        table: `${store.db}.wakes`,
        values: [
          { id: `wk_stale_${i}`, environment: 'stale', captured_at: Date.now(), path: `/${i}`, retention_days: 30 },
        ],
        format: 'JSONEachRow',
      });
    }
    // Two different blocks: both stored (under the stale token the second was taken for a duplicate).
    expect(await q.count('stale')).toBe(2);
  });

  it('stores a batch once even when the same batch is inserted twice (dedup token)', async () => {
    const ins = new WakeInserter(
      store,
      wakeLogCodec(() => 30),
    );
    const q = new WakeQuerier(store);
    const batch = [wake(1, { environment: 'dedup' }), wake(2, { environment: 'dedup' })];
    await ins.insert(batch, 'batch-1');
    await ins.insert(batch, 'batch-1');
    expect(await q.count('dedup')).toBe(2);
    await ins.insert(batch.slice(0, 1), 'batch-2');
    expect(await q.count('dedup')).toBe(3);
  });

  it('inserts a sealed log segment from its file, both tables, once per token; and the same from lines, for a server', async () => {
    const { Wal } = await import('../../src/capture/wal.js');
    const { silentLogger } = await import('../../src/log.js');
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const ins = new WakeInserter(
      store,
      wakeLogCodec(() => 30),
    );
    const q = new WakeQuerier(store);
    const detail = {
      query: "?q=it's",
      request_headers: [['content-type', 'application/json']] as [string, string][],
      response_headers: [['x-tab', 'a\tb']] as [string, string][],
      request_body: {
        body: '{"a":"line\\nbreak\\\\"}\n\t\u00e9',
        bytes: 30,
        truncated: false,
        encoding: 'utf8' as const,
      },
      response_body: { body: 'AAEC', bytes: 3, truncated: true, encoding: 'base64' as const },
      diff: null,
    };
    const captured = (d: typeof detail | (Omit<typeof detail, 'request_body'> & { request_body: null })) => {
      const { request_body: rq, response_body: rs, ...rest } = d;
      const c = (b: (typeof detail)['request_body' | 'response_body'] | null) =>
        b && { data: Buffer.from(b.body), bytes: b.bytes, truncated: b.truncated, encoding: b.encoding };
      return { ...rest, request_body: c(rq), response_body: c(rs) };
    };
    const make = (environment: string) => [
      wake(1, { environment, detail: captured(detail) }),
      wake(2, { environment, path: "/p'\\", refused: true }),
      wake(3, { environment, detail: captured({ ...detail, request_body: null }) }),
    ];
    /** The rows appended to a fresh log and sealed: the batch's token and file. */
    const seal = (rows: Wake[], dirName: string, tag = '') => {
      const wal = new Wal<Wake>(
        mkdtempSync(join(tmpdir(), dirName)),
        1_000_000,
        { syncIntervalMs: 60_000, fsyncIntervalMs: 60_000, ...(tag ? { tag } : {}) },
        silentLogger,
        wakeLogCodec(() => 30),
      );
      for (const w of rows) wal.append(w);
      const sealed = wal.seal();
      wal.close();
      return { token: sealed?.token as string, file: sealed?.file as string };
    };
    // This version's segments go through the log table; an earlier version's (no tag) by two inserts.
    for (const tag of ['', LOG_SEGMENT_TAG]) {
      const env = `segfile${tag}`;
      const batch = make(env);
      const sealed = seal(batch, "wg seg'", tag);
      expect(sealed.file.endsWith(tag ? `.${tag}.wal` : '-0.wal')).toBe(true);
      // Once its line is queued, a wake lets its detail go: the segment holds it.
      expect(batch[0]?.detail).toBeUndefined();
      expect(batch[0]?.detail_in_log).toBe(true);
      expect(store.readsFiles).toBe(true);
      if (tag) {
        // As the capture batcher hands it over: the file, no wake kept in memory.
        await ins.insert([], sealed.token, sealed.file);
        await ins.insert([], sealed.token, sealed.file);
      } else {
        // Its wakes not in memory (the file is the batch): its detail still goes in.
        await ins.insert([], sealed.token, sealed.file);
        expect(await q.detail(env, batch[0]?.id as string, batch[0]?.captured_at as number)).not.toBeNull();
        await ins.insert(batch, sealed.token, sealed.file);
      }
      expect(await q.count(env)).toBe(3);
      // Every column of the wake as recorded (the wakes insert reads only the line's first columns).
      const rs = await store.client.query({
        query: `SELECT id, path, status, latency_ms, consumer, key_id, retention_days, path_truncated, replay_of, toUnixTimestamp64Milli(captured_at) AS t FROM ${store.db}.wakes WHERE environment = {env:String} ORDER BY id`,
        query_params: { env },
        format: 'JSONEachRow',
      });
      const stored = await rs.json<Record<string, unknown>>();
      const expected = [...batch]
        .sort((a, b) => (a.id < b.id ? -1 : 1))
        .map((w) => ({
          id: w.id,
          path: w.path,
          status: w.status,
          latency_ms: w.latency_ms,
          consumer: w.consumer,
          key_id: w.key_id,
          retention_days: 30,
          path_truncated: 0,
          replay_of: '',
          t: w.captured_at,
        }));
      expect(stored).toEqual(expected);
      expect(await q.detail(env, batch[0]?.id as string, batch[0]?.captured_at as number)).toEqual(detail);
      expect(await q.detail(env, batch[1]?.id as string, batch[1]?.captured_at as number)).toBeNull();
      expect(await q.detail(env, batch[2]?.id as string, batch[2]?.captured_at as number)).toEqual({
        ...detail,
        request_body: null,
      });
    }
    // A store that cannot read our files (a ClickHouse server) gets the segment's lines cut per table.
    const server = { ...store, readsFiles: false };
    const viaServer = make('segserver');
    const sealed2 = seal(viaServer, 'wg-seg-');
    await new WakeInserter(
      server,
      wakeLogCodec(() => 30),
    ).insert(viaServer, sealed2.token, sealed2.file);
    expect(await q.count('segserver')).toBe(3);
    expect(await q.detail('segserver', viaServer[0]?.id as string, viaServer[0]?.captured_at as number)).toEqual(
      detail,
    );
    // The same batch as a server gets it (cut from the lines, no file): the same rows.
    const again = make('seglines');
    await ins.insert(again, 'lines-1');
    await ins.insert(again, 'lines-1');
    expect(await q.count('seglines')).toBe(3);
    expect(await q.detail('seglines', again[0]?.id as string, again[0]?.captured_at as number)).toEqual(detail);
  });

  it('pages newest first without skipping or repeating rows that share a millisecond', async () => {
    const ins = new WakeInserter(
      store,
      wakeLogCodec(() => 30),
    );
    const q = new WakeQuerier(store);
    // 25 rows in the same millisecond, 25 spread out.
    const rows = [
      ...Array.from({ length: 25 }, (_, i) => wake(i, { environment: 'paging', captured_at: base + 1000 })),
      ...Array.from({ length: 25 }, (_, i) => wake(i, { environment: 'paging' })),
    ];
    await ins.insert(rows, 'paging');
    const seen: string[] = [];
    let after = null;
    for (;;) {
      const page = await q.list({ environment: 'paging' }, 7, after);
      seen.push(...page.rows.map((r) => r.id));
      if (!page.hasMore) break;
      const last = page.rows[page.rows.length - 1] as Wake;
      after = { t: last.captured_at, id: last.id };
    }
    expect(seen.length).toBe(50);
    expect(new Set(seen).size).toBe(50);
    const expected = [...rows].sort((a, b) => b.captured_at - a.captured_at || (a.id < b.id ? 1 : -1)).map((r) => r.id);
    expect(seen).toEqual(expected);
  });

  it('filters and reads back by id', async () => {
    const ins = new WakeInserter(
      store,
      wakeLogCodec(() => 30),
    );
    const q = new WakeQuerier(store);
    const a = wake(1, { environment: 'f', status: 503, latency_ms: 900, consumer: 'acme', key_id: 'key_a' });
    const b = wake(2, { environment: 'f', status: 200, latency_ms: 5, path: '/v2/payments/p2/refunds' });
    await ins.insert([a, b], 'f');
    expect((await q.list({ environment: 'f', statusClass: 5 }, 10, null)).rows.map((r) => r.id)).toEqual([a.id]);
    expect((await q.list({ environment: 'f', status: 200 }, 10, null)).rows.map((r) => r.id)).toEqual([b.id]);
    expect((await q.list({ environment: 'f', minLatencyMs: 5 }, 10, null)).rows.map((r) => r.id)).toEqual([a.id]);
    expect((await q.list({ environment: 'f', consumer: 'acme' }, 10, null)).rows.map((r) => r.id)).toEqual([a.id]);
    expect((await q.list({ environment: 'f', keyId: 'key_a' }, 10, null)).rows.map((r) => r.id)).toEqual([a.id]);
    expect(
      (await q.list({ environment: 'f', pathPattern: '^/v2/payments/[^/]+/refunds$' }, 10, null)).rows.map((r) => r.id),
    ).toEqual([b.id]);
    expect(await q.get('f', a.id, a.captured_at)).toEqual({ ...a, path_truncated: false });
    expect(await q.get('production', a.id, a.captured_at)).toBeNull();
  });

  it('keeps the protocol, the client certificate and the trace context, through the log table and from lines', async () => {
    const { Wal } = await import('../../src/capture/wal.js');
    const { silentLogger } = await import('../../src/log.js');
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const codec = wakeLogCodec(() => 30);
    const ins = new WakeInserter(store, codec);
    const q = new WakeQuerier(store);
    const more = {
      protocol: 'h2',
      tls_subject: "CN=client 'one',O=Acme",
      tls_fingerprint: 'ab'.repeat(32),
      trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
      span_id: '00f067aa0ba902b7',
    };
    for (const env of ['trace-seg', 'trace-lines']) {
      const a = wake(1, { environment: env, ...more });
      const b = wake(2, { environment: env });
      if (env === 'trace-seg') {
        const wal = new Wal<Wake>(
          mkdtempSync(join(tmpdir(), 'wg-trace-')),
          1_000_000,
          { syncIntervalMs: 60_000, fsyncIntervalMs: 60_000, tag: LOG_SEGMENT_TAG },
          silentLogger,
          codec,
        );
        wal.append(a);
        wal.append(b);
        const sealed = wal.seal();
        wal.close();
        await ins.insert([], sealed?.token as string, sealed?.file as string);
      } else await ins.insert([a, b], env);
      expect(await q.get(env, a.id, a.captured_at)).toEqual({ ...a, path_truncated: false });
      // A wake without them reads back without them (the columns' defaults).
      expect(await q.get(env, b.id, b.captured_at)).toEqual({ ...b, path_truncated: false });
    }
  });

  it('upgrades a version-15 store: its wakes read back with the new fields absent, and new ones go through the remade log table', async () => {
    // The same engine, another database (the log table's insert names it).
    const old: Store = { ...store, db: `${store.db}_v15` };
    await store.client.command({ query: `CREATE DATABASE IF NOT EXISTS ${old.db}` });
    await migrate(
      old,
      MIGRATIONS.filter((m) => m.version <= 15),
    );
    const before = wake(1, { environment: 'upgrade' });
    await store.client.insert({
      table: `${old.db}.wakes`,
      values: [
        {
          ...before,
          captured_at: new Date(before.captured_at).toISOString().slice(0, 23).replace('T', ' '),
          retention_days: 30,
          path_truncated: 0,
          replay_of: '',
        },
      ],
      format: 'JSONEachRow',
    });
    expect(await migrate(old)).toEqual(MIGRATIONS.filter((m) => m.version > 15).map((m) => m.version));
    const q = new WakeQuerier(old);
    expect(await q.get('upgrade', before.id, before.captured_at)).toEqual({ ...before, path_truncated: false });
    const after = wake(2, {
      environment: 'upgrade',
      protocol: 'h2',
      trace_id: 'a'.repeat(32),
      span_id: 'b'.repeat(16),
    });
    // Through the remade log table, as the capture batcher hands a segment over.
    const { Wal } = await import('../../src/capture/wal.js');
    const { silentLogger } = await import('../../src/log.js');
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const wal = new Wal<Wake>(
      mkdtempSync(join(tmpdir(), 'wg-upgrade-')),
      1_000_000,
      { syncIntervalMs: 60_000, fsyncIntervalMs: 60_000, tag: LOG_SEGMENT_TAG },
      silentLogger,
      wakeLogCodec(() => 30),
    );
    wal.append(after);
    const sealed = wal.seal();
    wal.close();
    await new WakeInserter(
      old,
      wakeLogCodec(() => 30),
    ).insert([], sealed?.token as string, sealed?.file as string);
    expect(await q.get('upgrade', after.id, after.captured_at)).toEqual({ ...after, path_truncated: false });
  });
  it("leaves out the routes it is asked to (the gateway's own traffic: management=exclude), in lists and stats", async () => {
    const { MANAGEMENT_ROUTES } = await import('../../src/capture/wake-filter.js');
    const ins = new WakeInserter(
      store,
      wakeLogCodec(() => 30),
    );
    const q = new WakeQuerier(store);
    const env = 'exclude-routes';
    const t = base + 3_600_000;
    const ws = ['payments', 'v2', 'console', 'orders'].map((route, i) =>
      wake(i, { environment: env, route, captured_at: t + i }),
    );
    await ins.insert(ws, env);
    const now = t + 60_000;
    const routes = async (excludeRoutes?: readonly string[]) =>
      (await q.list({ environment: env, ...(excludeRoutes ? { excludeRoutes } : {}) }, 10, null, now)).rows
        .map((w) => w.route)
        .sort();
    expect(await routes()).toEqual(['console', 'orders', 'payments', 'v2']);
    expect(await routes(MANAGEMENT_ROUTES)).toEqual(['orders', 'payments']);
    expect(await routes([])).toEqual(['console', 'orders', 'payments', 'v2']);
    const stats = async (excludeRoutes?: readonly string[]) =>
      [...new Set((await q.stats(env, t - 60_000, now, undefined, excludeRoutes)).map((r) => r.route))].sort();
    expect(await stats()).toEqual(['console', 'orders', 'payments', 'v2']);
    expect(await stats(MANAGEMENT_ROUTES)).toEqual(['orders', 'payments']);
  });
});
