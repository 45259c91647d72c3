import { randomBytes } from 'node:crypto';
import { queryRows, type Store } from './store.js';

/**
 * Instances that share a ClickHouse server take turns at its migrations (a fleet
 * started at once, `docker compose up --scale wakegate=3`, or a new version started
 * beside a running one): one applies them while the others wait, then find them done.
 *
 * ClickHouse has no locks, but creating a table is all-or-nothing: exactly one of many
 * `CREATE TABLE {db}.migration_lock` succeeds, and its holder's id is in the table's
 * comment, made with it (never a moment without it). Its lease runs on the server's
 * clock: from the table's making, then to the latest time its holder writes into it
 * (every few seconds while it migrates). Its holder drops it when done. A holder that
 * died leaves a lock whose lease has lapsed: a waiter takes it over by first creating
 * a guard named after that holder (again exactly one succeeds), checking once more,
 * then dropping the lock. A guard left by a waiter that died has a lease of its own.
 * The holder checks before each migration that the lock is still its own.
 */

const LEASE_S = 30;
const RENEW_MS = 5_000;
const POLL_MS = 250;
const LOCK = 'migration_lock';

export interface MigrationLock {
  /** Throws when the lock is no longer this holder's (taken over after its lease ran out). */
  check(): Promise<void>;
  release(): Promise<void>;
}

export interface LockOptions {
  /** Told once when another instance holds the lock (its id). */
  waiting?: (holder: string) => void;
  /** Waits between tries; injected by tests. */
  sleep?: (ms: number) => Promise<void>;
  /** The lease in seconds (tests shorten it). */
  leaseSeconds?: number;
  /** Ends the wait (a stop asked while the gateway starts): the take throws. */
  signal?: AbortSignal;
}

const isExists = (e: unknown) => /TABLE_ALREADY_EXISTS|already exists/i.test(String(e));
const isMissing = (e: unknown) => /UNKNOWN_TABLE|Unknown table|doesn't exist|does not exist/i.test(String(e));

/** A table of the lock as the server has it: its comment (the holder), and whether its lease still runs. */
interface Held {
  holder: string;
  live: boolean;
}

/** Takes the migration lock of `store`'s database, waiting for as long as another holder keeps renewing it. */
export async function takeMigrationLock(store: Store, o: LockOptions = {}): Promise<MigrationLock> {
  const { client, db } = store;
  const holder = randomBytes(8).toString('hex');
  const lease = o.leaseSeconds ?? LEASE_S;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const table = `${db}.${LOCK}`;
  // MergeTree, not Memory: what a holder writes is there for every replica that answers.
  const create = (name: string, id: string) =>
    client.command({
      query: `CREATE TABLE ${db}.${name} (holder String, until DateTime64(3)) ENGINE = MergeTree ORDER BY until COMMENT '${id}'`,
    });
  // A renewal writes only into a lock that is still this holder's: never into one taken over.
  const renew = () =>
    client.command({
      query: `INSERT INTO ${table} SELECT {holder:String}, now64(3) + toIntervalSecond({lease:UInt32}) WHERE (SELECT comment FROM system.tables WHERE database = {db:String} AND name = {name:String}) = {holder:String}`,
      query_params: { holder, lease, db, name: LOCK },
    });
  let told = false;
  for (;;) {
    if (o.signal?.aborted) throw new Error('stopped while waiting for another instance to apply migrations');
    try {
      await create(LOCK, holder);
      // Its first row at once: the table's making is known only to the second.
      await renew();
      break;
    } catch (e) {
      if (!isExists(e)) throw e;
    }
    const held = await heldBy(store, LOCK, lease);
    if (held === null) continue; // Released meanwhile: try again at once.
    if (held.live) {
      if (!told) o.waiting?.(held.holder);
      told = true;
      await sleep(POLL_MS);
      continue;
    }
    // Its holder stopped renewing it: one waiter takes it over.
    await takeOver(store, held.holder, lease);
    await sleep(POLL_MS);
  }
  let lost = false;
  let renewing = Promise.resolve();
  const timer = setInterval(
    () => {
      renewing = renew().then(
        () => {},
        () => {},
      );
    },
    Math.min(RENEW_MS, (lease * 1000) / 3),
  );
  timer.unref();
  return {
    async check() {
      if (lost) throw new Error('the migration lock was taken over by another instance');
      const held = await heldBy(store, LOCK, lease);
      if (held?.holder !== holder) {
        lost = true;
        throw new Error('the migration lock was taken over by another instance');
      }
    },
    async release() {
      clearInterval(timer);
      await renewing;
      if (lost) return;
      await client.command({ query: `DROP TABLE IF EXISTS ${table}` });
    },
  };
}

/**
 * The lock table `name` as the server has it, or null when there is none: its holder
 * (its comment), and whether its lease runs (made, or last renewed, within `lease` s;
 * the making counted to the whole second, so never less; without `rows`, a guard: made
 * within them).
 */
async function heldBy(store: Store, name: string, lease: number, rows = true): Promise<Held | null> {
  const { db } = store;
  const [t] = await queryRows<{ holder: string; fresh: number }>(
    store,
    `SELECT comment AS holder,
        toUnixTimestamp(metadata_modification_time) + {lease:UInt32} >= toUnixTimestamp(now()) AS fresh
      FROM system.tables WHERE database = {db:String} AND name = {name:String}`,
    { db, name, lease },
  );
  if (t === undefined) return null;
  if (Number(t.fresh) === 1 || !rows) return { holder: t.holder, live: Number(t.fresh) === 1 };
  try {
    const [row] = await queryRows<{ live: number }>(
      store,
      `SELECT max(until) > now64(3) AS live FROM ${db}.${name} WHERE holder = {holder:String}`,
      { holder: t.holder },
    );
    return { holder: t.holder, live: Number(row?.live ?? 0) === 1 };
  } catch (e) {
    if (isMissing(e)) return null;
    throw e;
  }
}

/** Removes a lock whose holder `stale` stopped renewing it; of many waiters, one does. */
async function takeOver(store: Store, stale: string, lease: number): Promise<void> {
  const { client, db } = store;
  // Named after the stale holder (hex, as this module makes them): only one waiter makes it.
  const guard = `${LOCK}_takeover_${/^[0-9a-f]{16}$/.test(stale) ? stale : 'other'}`;
  try {
    await client.command({
      query: `CREATE TABLE ${db}.${guard} (x UInt8) ENGINE = MergeTree ORDER BY x COMMENT 'guard'`,
    });
  } catch (e) {
    if (!isExists(e)) throw e;
    // Another waiter is taking it over; one that died doing so left its guard, which lapses too.
    const g = await heldBy(store, guard, lease, false);
    if (g !== null && !g.live) await client.command({ query: `DROP TABLE IF EXISTS ${db}.${guard}` });
    return;
  }
  try {
    // Still that holder's, and still lapsed: a waiter that read it late must not drop a new lock.
    const held = await heldBy(store, LOCK, lease);
    if (held !== null && held.holder === stale && !held.live)
      await client.command({ query: `DROP TABLE IF EXISTS ${db}.${LOCK}` });
  } finally {
    await client.command({ query: `DROP TABLE IF EXISTS ${db}.${guard}` });
  }
}
