import type { KeyRateLimit, KeyRecord } from '../auth/key.js';
import type { Store } from './store.js';
import { queryRows } from './store.js';

interface KeyRowOut {
  id: string;
  environment: string;
  label: string;
  consumer: string;
  scopes: string[];
  rate_limit: string;
  replaces: string;
  secret_hash: string;
  created_ms: string;
  revoke_ms: string | null;
  revoked_ms: string | null;
  updated_ms: string;
  bootstrap: number;
  tls_fingerprint: string;
  bucket: string;
}

const SELECT = `SELECT id, environment, label, consumer, scopes, rate_limit, replaces, secret_hash,
  toUnixTimestamp64Milli(created_at) AS created_ms,
  if(isNull(revoke_at), NULL, toUnixTimestamp64Milli(assumeNotNull(revoke_at))) AS revoke_ms,
  if(isNull(revoked_at), NULL, toUnixTimestamp64Milli(assumeNotNull(revoked_at))) AS revoked_ms,
  toUnixTimestamp64Milli(updated_at) AS updated_ms, bootstrap, tls_fingerprint, bucket`;

const num = (v: string | null): number | null => (v === null ? null : Number(v));
const fromRow = (r: KeyRowOut): KeyRecord => ({
  id: r.id,
  environment: r.environment,
  label: r.label,
  consumer: r.consumer,
  scopes: r.scopes,
  rate_limit: r.rate_limit ? (JSON.parse(r.rate_limit) as KeyRateLimit) : null,
  replaces: r.replaces || null,
  secret_hash: r.secret_hash,
  created_at: Number(r.created_ms),
  revoke_at: num(r.revoke_ms),
  revoked_at: num(r.revoked_ms),
  updated_at: Number(r.updated_ms),
  ...(Number(r.bootstrap) === 1 ? { bootstrap: true } : {}),
  ...(r.tls_fingerprint ? { tls_fingerprint: r.tls_fingerprint } : {}),
  ...(r.bucket ? { bucket: r.bucket } : {}),
});

export interface Revocation {
  revoke_at: number | null;
  revoked_at: number | null;
  written_at: number;
}

const earliest = (a: number | null, b: number | null): number | null =>
  a === null ? b : b === null ? a : Math.min(a, b);

/**
 * A key's newest version with the earliest revocation any of its versions carried: a
 * revocation is never undone, whichever instance wrote the newest version from what it
 * had read. Its updated_at is the latest of either, so a poll's cursor passes both.
 */
function withRevocation(k: KeyRecord, r: Revocation | undefined): KeyRecord {
  if (r === undefined) return k;
  const revoke_at = earliest(k.revoke_at, r.revoke_at);
  const revoked_at = earliest(k.revoked_at, r.revoked_at);
  const updated_at = Math.max(k.updated_at, r.written_at);
  if (revoke_at === k.revoke_at && revoked_at === k.revoked_at && updated_at === k.updated_at) return k;
  return { ...k, revoke_at, revoked_at, updated_at };
}

/** Owns the api_keys, key_revocations and key_usage tables. Each change is a new row version (updated_at). */
export class KeyTable {
  constructor(private readonly store: Store) {}

  async put(k: KeyRecord): Promise<void> {
    // The revocation first: a version stored without it (a crash between) is revoked all the same when read.
    if (k.revoke_at !== null || k.revoked_at !== null) {
      await this.store.client.insert({
        table: `${this.store.db}.key_revocations`,
        format: 'JSONEachRow',
        values: [{ id: k.id, revoke_at: k.revoke_at, revoked_at: k.revoked_at, written_at: k.updated_at }],
      });
    }
    await this.store.client.insert({
      table: `${this.store.db}.api_keys`,
      format: 'JSONEachRow',
      values: [
        {
          id: k.id,
          environment: k.environment,
          label: k.label,
          consumer: k.consumer,
          scopes: k.scopes,
          rate_limit: k.rate_limit ? JSON.stringify(k.rate_limit) : '',
          replaces: k.replaces ?? '',
          secret_hash: k.secret_hash,
          created_at: k.created_at,
          revoke_at: k.revoke_at,
          revoked_at: k.revoked_at,
          updated_at: k.updated_at,
          bootstrap: k.bootstrap ? 1 : 0,
          tls_fingerprint: k.tls_fingerprint ?? '',
          bucket: k.bucket ?? '',
        },
      ],
    });
    this.store.changes?.changed('api_keys');
  }

  /**
   * Every key changed at or after `sinceMs` (all keys for 0): its latest version, with
   * its revocations merged in, and keys another instance revoked since then.
   */
  async changedSince(sinceMs: number): Promise<KeyRecord[]> {
    const db = this.store.db;
    const changed = await queryRows<KeyRowOut>(
      this.store,
      `${SELECT} FROM ${db}.api_keys FINAL WHERE updated_at >= fromUnixTimestamp64Milli({since:Int64}, 'UTC')`,
      { since: sinceMs },
    );
    const revoked = await this.revocations(sinceMs === 0 ? null : { since: sinceMs, ids: changed.map((r) => r.id) });
    const seen = new Set(changed.map((r) => r.id));
    const others = [...revoked.keys()].filter((id) => !seen.has(id));
    const more =
      others.length === 0
        ? []
        : await queryRows<KeyRowOut>(
            this.store,
            `${SELECT} FROM ${db}.api_keys FINAL WHERE id IN {ids:Array(String)}`,
            {
              ids: others,
            },
          );
    return [...changed, ...more].map((r) => withRevocation(fromRow(r), revoked.get(r.id)));
  }

  async get(id: string): Promise<KeyRecord | null> {
    const sql = `${SELECT} FROM ${this.store.db}.api_keys FINAL WHERE id = {id:String}`;
    const [row] = await queryRows<KeyRowOut>(this.store, sql, { id });
    return row ? withRevocation(fromRow(row), (await this.revocations({ ids: [id] })).get(id)) : null;
  }

  async byHash(hash: string): Promise<KeyRecord | null> {
    const sql = `${SELECT} FROM ${this.store.db}.api_keys FINAL WHERE secret_hash = {h:String} LIMIT 1`;
    const [row] = await queryRows<KeyRowOut>(this.store, sql, { h: hash });
    return row ? withRevocation(fromRow(row), (await this.revocations({ ids: [row.id] })).get(row.id)) : null;
  }

  /**
   * How many revocations were ever stored (rows are never replaced nor deleted, so the
   * count only grows): a poll that sees it change reads them all (allRevocations), whatever
   * clock stamped them. A revocation written by an instance whose clock is far behind
   * this one's falls before the poll's window of updated_at, and would be missed.
   */
  async revocationCount(): Promise<number> {
    const [row] = await queryRows<{ n: string }>(
      this.store,
      `SELECT count() AS n FROM ${this.store.db}.key_revocations`,
    );
    return Number(row?.n ?? 0);
  }

  /** Every key's earliest revoke_at and revoked_at (and its newest written_at). */
  allRevocations(): Promise<Map<string, Revocation>> {
    return this.revocations(null);
  }

  /**
   * The earliest revoke_at and revoked_at stored for each key: of every key (null), or
   * of these keys and of those whose revocations were written at or after `since`.
   */
  private async revocations(of: { ids: readonly string[]; since?: number } | null): Promise<Map<string, Revocation>> {
    // HAVING, not a subquery: on a cluster both would be Distributed tables, which ClickHouse refuses to nest.
    const filter =
      of === null
        ? 'GROUP BY id'
        : of.since === undefined
          ? 'WHERE id IN {ids:Array(String)} GROUP BY id'
          : "GROUP BY id HAVING id IN {ids:Array(String)} OR max(written_at) >= fromUnixTimestamp64Milli({since:Int64}, 'UTC')";
    const rows = await queryRows<{
      id: string;
      revoke_ms: string | null;
      revoked_ms: string | null;
      written_ms: string;
    }>(
      this.store,
      `SELECT id,
        if(isNull(min(revoke_at)), NULL, toUnixTimestamp64Milli(assumeNotNull(min(revoke_at)))) AS revoke_ms,
        if(isNull(min(revoked_at)), NULL, toUnixTimestamp64Milli(assumeNotNull(min(revoked_at)))) AS revoked_ms,
        toUnixTimestamp64Milli(max(written_at)) AS written_ms
        FROM ${this.store.db}.key_revocations ${filter}`,
      of === null ? {} : { ids: [...of.ids], since: of.since ?? 0 },
    );
    return new Map(
      rows.map((r) => [
        r.id,
        { revoke_at: num(r.revoke_ms), revoked_at: num(r.revoked_ms), written_at: Number(r.written_ms) },
      ]),
    );
  }

  async count(): Promise<number> {
    const [row] = await queryRows<{ c: string }>(
      this.store,
      `SELECT count() AS c FROM ${this.store.db}.api_keys FINAL`,
    );
    return Number(row?.c ?? 0);
  }

  async writeUsage(usage: ReadonlyMap<string, number>): Promise<void> {
    if (usage.size === 0) return;
    await this.store.client.insert({
      table: `${this.store.db}.key_usage`,
      format: 'JSONEachRow',
      values: [...usage].map(([key_id, t]) => ({ key_id, last_used_at: t })),
    });
  }

  /** The stored last use of each of these keys (those never used are absent). */
  async lastUsedMany(ids: readonly string[]): Promise<Map<string, number>> {
    if (ids.length === 0) return new Map();
    const sql = `SELECT key_id, toUnixTimestamp64Milli(max(last_used_at)) AS t
      FROM ${this.store.db}.key_usage WHERE key_id IN {ids:Array(String)} GROUP BY key_id`;
    const rows = await queryRows<{ key_id: string; t: string }>(this.store, sql, { ids: [...ids] });
    return new Map(rows.map((r) => [r.key_id, Number(r.t)]));
  }
}
