import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/client.js';
import { takeMigrationLock } from '../../src/store/migration-lock.js';
import type { Store } from '../../src/store/store.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';

/** The migration lock against a real ClickHouse HTTP interface (chDB behind it). */
let storage: HttpStorage;
let a: Store;
let b: Store;

const open = () =>
  openStore({
    clickhouse_url: storage.url,
    clickhouse_database: 'locktest',
  } as Parameters<typeof openStore>[0]);

beforeAll(async () => {
  storage = await startHttpStorage();
  a = await open();
  b = await open();
  await a.client.command({ query: 'CREATE DATABASE IF NOT EXISTS locktest' });
}, 60_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  await storage?.stop();
}, 60_000);

const tables = async () => {
  const rs = await a.client.query({
    query: "SELECT name FROM system.tables WHERE database = 'locktest' ORDER BY name",
    format: 'JSONEachRow',
  });
  return (await rs.json<{ name: string }>()).map((r) => r.name);
};

describe('the migration lock', () => {
  it('lets one holder in at a time; the next gets it once the first releases', async () => {
    const first = await takeMigrationLock(a);
    const waited: string[] = [];
    let secondIn = false;
    const second = takeMigrationLock(b, { waiting: (h) => waited.push(h) }).then((l) => {
      secondIn = true;
      return l;
    });
    // Told once that it waits (bounded), and not let in while the first holds the lock.
    for (let i = 0; i < 100 && waited.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 600));
    expect(waited).toHaveLength(1);
    expect(secondIn).toBe(false);
    await first.check();
    await first.release();
    const l2 = await second;
    expect(secondIn).toBe(true);
    await l2.check();
    await l2.release();
    expect(await tables()).toEqual([]);
  }, 30_000);

  it("takes over a lock whose holder stopped renewing it; the old holder's check then fails and its renewals write nothing", async () => {
    // The holder "dies": its renewals stop reaching the server (a store whose inserts go nowhere).
    let renewals = true;
    const client = new Proxy(a.client, {
      get(t, p, r) {
        if (p === 'command')
          return async (q: { query: string }) =>
            renewals || !q.query.startsWith('INSERT') ? t.command(q as never) : undefined;
        const v = Reflect.get(t, p, r);
        return typeof v === 'function' ? v.bind(t) : v;
      },
    });
    const dead = await takeMigrationLock({ ...a, client } as Store, { leaseSeconds: 1 });
    renewals = false;
    const t0 = Date.now();
    const taken = await takeMigrationLock(b, { leaseSeconds: 1 });
    expect(Date.now() - t0).toBeLessThan(8000);
    await taken.check();
    await expect(dead.check()).rejects.toThrow(/taken over/);
    // The old holder, back, renews only a lock that is still its own: never this one.
    renewals = true;
    await new Promise((r) => setTimeout(r, 800));
    const rs = await a.client.query({
      query: 'SELECT DISTINCT holder FROM locktest.migration_lock',
      format: 'JSONEachRow',
    });
    expect((await rs.json<{ holder: string }>()).length).toBeLessThanOrEqual(1);
    await taken.check();
    await dead.release();
    await taken.check();
    await taken.release();
    expect(await tables()).toEqual([]);
  }, 30_000);

  it('treats a lock of no known holder, never renewed (its maker died at once), as stale after a lease', async () => {
    await a.client.command({
      query: 'CREATE TABLE locktest.migration_lock (holder String, until DateTime64(3)) ENGINE = Memory',
    });
    const t0 = Date.now();
    const l = await takeMigrationLock(b, { leaseSeconds: 1 });
    const waited = Date.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(900);
    expect(waited).toBeLessThan(5000);
    await l.release();
    expect(await tables()).toEqual([]);
  }, 30_000);
});
