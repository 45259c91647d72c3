import { afterAll, beforeAll, expect, it } from 'vitest';
import { openStore } from '../../src/store/client.js';
import { takeMigrationLock } from '../../src/store/migration-lock.js';
import type { Store } from '../../src/store/store.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';

let storage: HttpStorage;
let a: Store;
const open = () =>
  openStore({ clickhouse_url: storage.url, clickhouse_database: 'lockkill' } as Parameters<typeof openStore>[0]);

beforeAll(async () => {
  storage = await startHttpStorage();
  a = await open();
  await a.client.command({ query: 'CREATE DATABASE IF NOT EXISTS lockkill' });
}, 60_000);
afterAll(async () => {
  await a?.close();
  await storage?.stop();
}, 60_000);

// Holder 'dead...' died holding the lock; a waiter began its takeover (made the guard
// table) and was killed before its finally dropped the guard. Every later waiter's
// takeOver() finds the guard, returns, and waits again: no gateway ever starts.
it('takes over a lapsed lock even when an earlier taker was killed mid-takeover', async () => {
  await a.client.command({
    query: 'CREATE TABLE lockkill.migration_lock (holder String, until DateTime64(3)) ENGINE = Memory',
  });
  await a.client.command({ query: "INSERT INTO lockkill.migration_lock VALUES ('00000000deadbeef', now64(3) - 100)" });
  await a.client.command({
    query: 'CREATE TABLE lockkill.migration_lock_takeover_00000000deadbeef (x UInt8) ENGINE = Memory',
  });
  let waited = '';
  const got = takeMigrationLock(a, { leaseSeconds: 1, waiting: (h) => (waited = h) }).then(
    () => 'acquired',
    (e) => `error: ${e}`,
  );
  const outcome = await Promise.race([
    got,
    new Promise((r) => setTimeout(() => r('still waiting after 10 s'), 10_000)),
  ]);
  console.log('outcome:', outcome, 'waiting told:', JSON.stringify(waited));
  expect(outcome).toBe('acquired');
}, 30_000);
