import { afterAll, beforeAll, expect, it } from 'vitest';
import { openStore } from '../../src/store/client.js';
import { takeMigrationLock } from '../../src/store/migration-lock.js';
import type { Store } from '../../src/store/store.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';

let storage: HttpStorage;
let a: Store;
let b: Store;
let c: Store;
const open = () =>
  openStore({ clickhouse_url: storage.url, clickhouse_database: 'lockrace' } as Parameters<typeof openStore>[0]);

/** The store, its lock's first row (the stamp) written `ms` late: a slow round trip. */
const slowStamp = (s: Store, ms: number): Store => {
  const client = new Proxy(s.client, {
    get(t, p, r) {
      if (p === 'command')
        return async (q: { query: string }) => {
          if (/^INSERT INTO \S+migration_lock SELECT/.test(q.query) && !q.query.includes('WHERE'))
            await new Promise((res) => setTimeout(res, ms));
          return t.command(q as never);
        };
      const v = Reflect.get(t, p, r);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
  return { ...s, client } as Store;
};

beforeAll(async () => {
  storage = await startHttpStorage();
  a = await open();
  b = await open();
  c = await open();
  await a.client.command({ query: 'CREATE DATABASE IF NOT EXISTS lockrace' });
}, 60_000);
afterAll(async () => {
  await a?.close();
  await b?.close();
  await c?.close();
  await storage?.stop();
}, 60_000);

// A lock left empty (its maker died before its row). Two waiters both time its
// emptiness; one takes it over and makes a new lock, whose row is written a little
// late. The other's `emptySince` still dates from the OLD lock (never reset when the
// table it timed was dropped), so it judges the NEW, still-empty lock stale at once and
// takes it over too (the guard '..._takeover_' was freed by the first): it drops the
// new lock under its maker.
it('never drops a lock just made by another waiter', async () => {
  await a.client.command({ query: 'DROP TABLE IF EXISTS lockrace.migration_lock' });
  await a.client.command({
    query: 'CREATE TABLE lockrace.migration_lock (holder String, until DateTime64(3)) ENGINE = Memory',
  });
  const results: string[] = [];
  let inside = 0;
  let overlap = false;
  const take = (s: Store, name: string) =>
    takeMigrationLock(slowStamp(s, 400), { leaseSeconds: 1 }).then(
      async (l) => {
        inside++;
        if (inside > 1) overlap = true;
        results.push(`${name} acquired`);
        await new Promise((r) => setTimeout(r, 600));
        const c = await l.check().then(
          () => 'holds',
          (e: Error) => `lost: ${e.message}`,
        );
        results.push(`${name} check: ${c}`);
        inside--;
        await l.release().catch(() => {});
      },
      (e) => {
        results.push(`${name} failed: ${String(e).slice(0, 140)}`);
      },
    );
  // Three instances start about together on the empty lock (w3 a little later).
  const w1 = take(a, 'w1');
  await new Promise((r) => setTimeout(r, 200));
  const w2 = take(b, 'w2');
  await new Promise((r) => setTimeout(r, 700));
  const w3 = take(c, 'w3');
  await Promise.all([w1, w2, w3]);
  console.log(results, { overlap });
  expect(overlap).toBe(false);
  expect(results.filter((r) => r.includes('failed') || r.includes('lost'))).toEqual([]);
}, 30_000);
