import { join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import type { Config } from '../config/index.js';
import { privateDir, privateUmask } from '../private-dir.js';
import { TableChanges } from './changes.js';
import { CLUSTER_SETTINGS } from './cluster.js';
import type { RawFormat, Store } from './store.js';

type RawInsert = (p: {
  table: string;
  columns: string[];
  format: RawFormat;
  values: Buffer;
  settings: Record<string, string | number>;
}) => Promise<unknown>;

/**
 * One `@clickhouse/client` for everything: chDB's embedded engine under
 * DATA_DIR by default, a ClickHouse server when `clickhouse_url` is set.
 */
export async function openStore(storage: Config['storage']): Promise<Store> {
  const db = storage.clickhouse_database;
  let client: ClickHouseClient;
  let raw: RawInsert | null = null;
  let closeEngine: (() => void) | null = null;
  let changes: TableChanges | null = null;
  let releaseChanges = () => {};
  if (storage.clickhouse_url) {
    const server = serverOf(storage);
    client = ownTokens(
      createClient({
        url: server.url,
        username: server.user,
        password: server.password,
        request_timeout: 10_000,
        max_open_connections: 16,
        clickhouse_settings: {
          date_time_input_format: 'best_effort',
          ...(storage.cluster === null ? {} : CLUSTER_SETTINGS),
        },
        // The client's own log lines are not the gateway's: every failure reaches the caller, which says it once.
        log: { level: ClickHouseLogLevel.OFF },
      }),
    );
  } else {
    // Imported lazily: the native engine is only loaded when it is used.
    const { createChdbConnection } = await import('chdb/connection');
    const path = join(storage.data_dir, 'clickhouse');
    privateUmask();
    privateDir(storage.data_dir);
    privateDir(path);
    // The engine starts with the first connection to its directory, and only that one's
    // arguments set it up: a session holding ENGINE_ARGS is opened first and kept open
    // beside the client's (connections to one directory share the engine).
    const { Session } = await import('chdb');
    const engine = new Session(path, { connectionArgs: [...ENGINE_ARGS] });
    let connection: ReturnType<typeof createChdbConnection>;
    try {
      connection = createChdbConnection({ path });
    } catch (e) {
      engine.close();
      throw e;
    }
    closeEngine = () => engine.close();
    ({ changes, release: releaseChanges } = changesOf(resolve(path)));
    raw = (p) => connection.chdb.rawInsert(p);
    client = ownTokens(createClient({ connection } as Parameters<typeof createClient>[0]));
  }
  const gate = new CallGate();
  gate.wrap(client);
  const rawInsert = raw ? gate.track(raw) : null;
  return {
    client,
    db,
    cluster: storage.cluster,
    readsFiles: raw !== null,
    changes,
    async insertBytes(table, columns, format, bytes, token) {
      if (bytes.length === 0) return;
      const settings = { insert_deduplication_token: token, insert_deduplicate: 1 as const };
      if (rawInsert) {
        await rawInsert({ table: `${db}.${table}`, columns: [...columns], format, values: bytes, settings });
        return;
      }
      await client.insert({
        table: `${db}.${table}`,
        columns: [...columns] as [string, ...string[]],
        format,
        values: Readable.from([bytes], { objectMode: false }),
        clickhouse_settings: settings,
      });
    },
    async close() {
      await gate.close(CLOSE_WAIT_MS);
      await client.close();
      closeEngine?.();
      releaseChanges();
      // The engine's own teardown may be deferred behind native work still running (a
      // call given up on by its caller keeps computing): the process must not end
      // before it is done, or it ends inside the engine (SIGSEGV at exit).
      if (raw) await (await import('chdb')).drainPending();
    },
  };
}

/**
 * A ClickHouse server's URL without credentials, and the user and password to send:
 * `CLICKHOUSE_USER`/`CLICKHOUSE_PASSWORD` when set, else those the URL holds
 * (`http://user:password@host:8123`), else `default` and none. A URL's credentials are
 * never sent as part of it, nor shown.
 */
export function serverOf(storage: Config['storage']): { url: string; user: string; password: string } {
  const raw = storage.clickhouse_url ?? '';
  let url = raw;
  let user = '';
  let password = '';
  try {
    const u = new URL(raw);
    user = decodeURIComponent(u.username);
    password = decodeURIComponent(u.password);
    if (u.username || u.password) {
      u.username = '';
      u.password = '';
      url = u.toString();
    }
  } catch {
    // Not a URL: the config's checks say so.
  }
  return {
    url,
    user: storage.clickhouse_user ?? (user || 'default'),
    password: storage.clickhouse_password ?? password,
  };
}

/**
 * Server settings the embedded engine starts with (not query settings: no SET
 * reaches them). Its memory worker reads the process's memory several times a
 * second by default, the engine's only work while the gateway is idle (0.2% of a
 * core); once a second does what it is for (correcting the engine's memory
 * accounting, purging freed pages past a threshold). chDB keeps no system log
 * tables and runs small background pools already (2 merge threads), so nothing
 * else is turned down.
 */
export const ENGINE_ARGS: readonly string[] = ['--memory_worker_period_ms=1000'];

/** The changes of the embedded stores open in this process, by directory (tests open several on one). */
const changesByDir = new Map<string, { changes: TableChanges; users: number }>();

function changesOf(dir: string): { changes: TableChanges; release: () => void } {
  let entry = changesByDir.get(dir);
  if (!entry) {
    entry = { changes: new TableChanges(), users: 0 };
    changesByDir.set(dir, entry);
  }
  const mine = entry;
  mine.users++;
  let released = false;
  return {
    changes: mine.changes,
    release: () => {
      if (released) return;
      released = true;
      if (--mine.users === 0 && changesByDir.get(dir) === mine) changesByDir.delete(dir);
    },
  };
}

/** How long a close waits for the calls already in the engine before closing it under them. */
const CLOSE_WAIT_MS = 15_000;

/** Storage is closing or closed: no call is started in the engine any more. */
export class StoreClosed extends Error {
  constructor() {
    super('storage is closed (the gateway is stopping)');
    this.name = 'StoreClosed';
  }
}

/**
 * Every call into the engine, counted while it runs. The embedded engine runs
 * queries on its own native threads: closing it (or ending the process) while one
 * is still running crashed the process (SIGSEGV at SIGTERM under load, when a poll
 * or an API read was still in the engine). A close refuses new calls, waits for the
 * running ones to finish, and only then closes the engine.
 */
class CallGate {
  private running = 0;
  private closing = false;
  private idle: (() => void) | null = null;

  /** `fn`, counted while its promise is unsettled; refused once closing. */
  track<A extends unknown[], R>(fn: (...a: A) => Promise<R>): (...a: A) => Promise<R> {
    return (...a: A) => {
      if (this.closing) return Promise.reject(new StoreClosed());
      this.running++;
      let p: Promise<R>;
      try {
        p = fn(...a);
      } catch (e) {
        this.done();
        return Promise.reject(e);
      }
      return p.finally(() => this.done());
    };
  }

  /**
   * Counts the client's own calls: query, insert, command, exec. (The embedded engine
   * has done its work when a query answers; its rows are then in this process.)
   */
  wrap(client: ClickHouseClient): void {
    const c = client as unknown as Record<'query' | 'insert' | 'command' | 'exec', (p: unknown) => Promise<unknown>>;
    for (const name of ['query', 'insert', 'command', 'exec'] as const) c[name] = this.track(c[name].bind(client));
  }

  private done(): void {
    this.running--;
    if (this.running === 0) this.idle?.();
  }

  /** Refuses new calls, then waits (at most `maxMs`) for the running ones. */
  async close(maxMs: number): Promise<void> {
    this.closing = true;
    if (this.running === 0) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, maxMs);
      this.idle = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }
}

/**
 * chDB's connection SETs a query's settings on its one engine session, where they
 * stay for every later query: an insert given no deduplication token would carry
 * the last one given, and a batch could be dropped as a duplicate of another. Every
 * insert and command names its own token, or none (harmless to a ClickHouse server,
 * which takes settings per request; the HTTP interface over chDB the tests use keeps
 * them like chDB does).
 */
function ownTokens(client: ClickHouseClient): ClickHouseClient {
  const own = <P extends { clickhouse_settings?: Record<string, unknown> }>(p: P): P => ({
    ...p,
    clickhouse_settings: { insert_deduplication_token: '', ...p.clickhouse_settings },
  });
  const insert = client.insert.bind(client);
  const command = client.command.bind(client);
  client.insert = ((p: Parameters<typeof insert>[0]) => insert(own(p))) as typeof client.insert;
  client.command = (p) => command(own(p));
  return client;
}
