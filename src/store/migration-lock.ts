import { randomBytes } from 'node:crypto';
import type { Store } from './store.js';

/**
 * Instances that share a ClickHouse server take turns at its migrations (a fleet
 * started at once, `docker compose up --scale wakegate=3`, or a new version started
 * beside a running one): one applies them while the others wait, then find them done.
 *
 * ClickHouse has no locks, but creating a table is all-or-nothing: exactly one of many
 * `CREATE TABLE {db}.migration_lock` succeeds. Its holder writes a row that says until
 * when (the server's clock, so gateways' clocks never matter) every few seconds, and
 * drops the table when done. A holder that died leaves a lock whose time has passed:
 * a waiter takes it over by first creating a table named after that holder's id
 * (again exactly one succeeds), then dropping both. The holder checks before each
 * migration that the lock is still its own.
 */

const LEASE_S = 30;
const RENEW_MS = 5_000;
const POLL_MS = 250;

/** Table names of the lock, plain identifiers (the database name is one too: config schema). */
const LOCK = 'migration_lock';

export interface MigrationLock {
  /** Throws when the lock is no longer this holder's (taken over after its lease ran out). */
  check(): Promise<void>;
  release(): Promise<void>;
}

export interface LockOptions {
  /** Told once when another instance holds the lock (whose id, and until when). */
  waiting?: (holder: string) => void;
  /** Waits between tries; injected by tests. */
  sleep?: (ms: number) => Promise<void>;
  /** The lease in seconds (tests shorten it). */
  leaseSeconds?: number;
}

const isExists = (e: unknown) => /TABLE_ALREADY_EXISTS|already exists/i.test(String(e));
const isMissing = (e: unknown) => /UNKNOWN_TABLE|Unknown table|doesn't exist|does not exist/i.test(String(e));

/** Takes the migration lock of `store`'s database, waiting for as long as another holder keeps renewing it. */
export async function takeMigrationLock(store: Store, o: LockOptions = {}): Promise<MigrationLock> {
  const { client, db } = store;
  const holder = randomBytes(8).toString('hex');
  const lease = o.leaseSeconds ?? LEASE_S;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const table = `${db}.${LOCK}`;
  const stamp = () =>
    client.command({
      query: `INSERT INTO ${table} SELECT {holder:String}, now64(3) + toIntervalSecond({lease:UInt32})`,
      query_params: { holder, lease },
    });
  // A renewal writes only into a lock that is still this holder's: never into one taken over.
  const renew = () =>
    client.command({
      query: `INSERT INTO ${table} SELECT {holder:String}, now64(3) + toIntervalSecond({lease:UInt32}) WHERE (SELECT argMax(holder, until) FROM ${table}) = {holder:String}`,
      query_params: { holder, lease },
    });
  let told = false;
  let emptySince = 0;
  for (;;) {
    try {
      await client.command({
        query: `CREATE TABLE ${table} (holder String, until DateTime64(3)) ENGINE = Memory`,
      });
      await stamp();
      break;
    } catch (e) {
      if (!isExists(e)) throw e;
    }
    // Held: by whom, and is its lease still running?
    let rows: { holder: string; live: number }[] = [];
    try {
      const rs = await client.query({
        query: `SELECT argMax(holder, until) AS holder, max(until) > now64(3) AS live FROM ${table}`,
        format: 'JSONEachRow',
      });
      rows = await rs.json();
    } catch (e) {
      if (!isMissing(e)) throw e;
      continue; // Released meanwhile: try again at once.
    }
    const other = rows[0]?.holder ?? '';
    // A lock with no row yet was just made: its holder is about to write one. Only one
    // left empty for a whole lease (its maker died in between) is stale.
    if (other === '' && emptySince === 0) emptySince = performance.now();
    const live = other === '' ? performance.now() - emptySince < lease * 1000 : Number(rows[0]?.live ?? 0) === 1;
    if (other !== '') emptySince = 0;
    if (live) {
      if (!told) o.waiting?.(other);
      told = true;
      await sleep(POLL_MS);
      continue;
    }
    // Its holder stopped renewing (or never wrote its row): one waiter takes it over.
    await takeOver(store, other);
    emptySince = 0;
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
      const rs = await client.query({
        query: `SELECT argMax(holder, until) AS holder FROM ${table}`,
        format: 'JSONEachRow',
      });
      const [row] = await rs.json<{ holder: string }>();
      if (row?.holder !== holder) {
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

/** Removes a lock whose holder (`stale`, '' when it wrote no row) stopped renewing it; of many waiters, one does. */
async function takeOver(store: Store, stale: string): Promise<void> {
  const { client, db } = store;
  // Named after the stale holder: only one waiter makes it. Hex or empty: a plain identifier.
  const guard = `${db}.${LOCK}_takeover_${/^[0-9a-f]*$/.test(stale) ? stale : 'x'}`;
  try {
    await client.command({ query: `CREATE TABLE ${guard} (x UInt8) ENGINE = Memory` });
  } catch (e) {
    if (isExists(e)) return; // Another waiter is taking it over.
    throw e;
  }
  try {
    // Still that holder's, and still not renewed (a waiter that read it late must not drop a new lock).
    const rs = await client.query({
      query: `SELECT argMax(holder, until) AS holder, max(until) > now64(3) AS live FROM ${db}.${LOCK}`,
      format: 'JSONEachRow',
    });
    const [row] = await rs.json<{ holder: string; live: number }>();
    if ((row?.holder ?? '') === stale && Number(row?.live ?? 0) !== 1)
      await client.command({ query: `DROP TABLE IF EXISTS ${db}.${LOCK}` });
  } catch (e) {
    if (!isMissing(e)) throw e;
  } finally {
    await client.command({ query: `DROP TABLE IF EXISTS ${guard}` });
  }
}
