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

/** Owns the api_keys and key_usage tables. Each change is a new row version (updated_at). */
export class KeyTable {
  constructor(private readonly store: Store) {}

  async put(k: KeyRecord): Promise<void> {
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

  /** Every key version changed at or after `sinceMs` (all keys for 0), latest version each. */
  async changedSince(sinceMs: number): Promise<KeyRecord[]> {
    const sql = `${SELECT} FROM ${this.store.db}.api_keys FINAL
      WHERE updated_at >= fromUnixTimestamp64Milli({since:Int64}, 'UTC')`;
    return (await queryRows<KeyRowOut>(this.store, sql, { since: sinceMs })).map(fromRow);
  }

  async get(id: string): Promise<KeyRecord | null> {
    const sql = `${SELECT} FROM ${this.store.db}.api_keys FINAL WHERE id = {id:String}`;
    const [row] = await queryRows<KeyRowOut>(this.store, sql, { id });
    return row ? fromRow(row) : null;
  }

  async byHash(hash: string): Promise<KeyRecord | null> {
    const sql = `${SELECT} FROM ${this.store.db}.api_keys FINAL WHERE secret_hash = {h:String} LIMIT 1`;
    const [row] = await queryRows<KeyRowOut>(this.store, sql, { h: hash });
    return row ? fromRow(row) : null;
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
