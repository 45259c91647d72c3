import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { SecretBox } from '../../src/seal.js';
import { KeyTable } from '../../src/store/keys.js';
import { MIGRATIONS, migrate } from '../../src/store/migrations.js';
import type { Store } from '../../src/store/store.js';
import { EndpointTable } from '../../src/store/webhooks.js';
import type { EndpointRecord } from '../../src/webhooks/records.js';
import { tempStore } from '../helpers/store.js';

/**
 * api_keys keeps a key's newest version; a version written from an older read (another
 * instance's certificate change or scheduled revocation) must not undo a revocation,
 * before the engine merges the versions or after. Revocations are kept apart
 * (key_revocations, migration 19) and a key read from storage takes the earliest.
 */
let base: Store;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ store: base, cleanup } = await tempStore());
}, 60_000);
afterAll(async () => cleanup?.(), 60_000);

const T = Date.UTC(2026, 10, 27, 12, 0, 0);
const key = (o: Partial<KeyRecord>): KeyRecord => ({
  id: 'key_raced',
  environment: 'production',
  label: 'raced',
  consumer: '',
  scopes: ['api:read'],
  rate_limit: null,
  replaces: null,
  secret_hash: 'h'.repeat(64),
  created_at: T,
  revoke_at: null,
  revoked_at: null,
  updated_at: T,
  ...o,
});

async function fresh(db: string, upTo?: number): Promise<Store> {
  const store: Store = { ...base, db };
  await migrate(store, upTo === undefined ? MIGRATIONS : MIGRATIONS.filter((m) => m.version <= upTo));
  return store;
}

describe('a revoked key read from storage', () => {
  it('stays revoked under a later version that does not carry the revocation, merged or not', async () => {
    const store = await fresh('revocations_live');
    const table = new KeyTable(store);
    await table.put(key({ updated_at: T + 1 }));
    await table.put(key({ revoked_at: T + 10, updated_at: T + 10 }));
    // Another instance's version, from its copy read before the revocation: stamped later.
    await table.put(key({ revoke_at: T + 86_400_000, tls_fingerprint: 'ab'.repeat(32), updated_at: T + 20 }));
    const check = async () => {
      const got = await table.get('key_raced');
      expect(got?.revoked_at).toBe(T + 10);
      expect(got?.revoke_at).toBe(T + 86_400_000);
      expect(got?.tls_fingerprint).toBe('ab'.repeat(32));
      expect((await table.byHash('h'.repeat(64)))?.revoked_at).toBe(T + 10);
      expect((await table.changedSince(0)).map((k) => k.revoked_at)).toEqual([T + 10]);
      expect((await table.changedSince(T + 15)).map((k) => k.revoked_at)).toEqual([T + 10]);
      expect(await table.changedSince(T + 21)).toEqual([]);
    };
    await check();
    // The engine keeps only the newest version once it merges.
    await store.client.command({ query: `OPTIMIZE TABLE ${store.db}.api_keys FINAL` });
    await check();
  });

  it('a revocation written with an older stamp than the newest version is still read by a poll past that version', async () => {
    const store = await fresh('revocations_poll');
    const table = new KeyTable(store);
    await table.put(key({ updated_at: T + 30 }));
    // Stored by an instance whose clock is behind: its row is older than the newest version.
    await table.put(key({ revoked_at: T + 5, updated_at: T + 5 }));
    await store.client.command({
      query: `ALTER TABLE ${store.db}.key_revocations UPDATE written_at = fromUnixTimestamp64Milli(toInt64(${T + 40}), 'UTC') WHERE 1 SETTINGS mutations_sync = 1`,
    });
    const [polled] = await table.changedSince(T + 35);
    expect(polled?.revoked_at).toBe(T + 5);
    expect(polled?.updated_at).toBe(T + 40);
  });

  it('migration 19 keeps the revocations of versions stored before it', async () => {
    const store = await fresh('revocations_upgrade', 18);
    const insert = (k: KeyRecord) =>
      store.client.insert({
        table: `${store.db}.api_keys`,
        format: 'JSONEachRow',
        values: [{ ...k, rate_limit: '', replaces: '', bootstrap: 0, tls_fingerprint: '', bucket: '' }],
      });
    // Both versions of the race, stored by the version before this one.
    await insert(key({ revoked_at: T + 10, updated_at: T + 10 }));
    await insert(key({ revoke_at: T + 86_400_000, updated_at: T + 20 }));
    await migrate(store);
    await store.client.command({ query: `OPTIMIZE TABLE ${store.db}.api_keys FINAL` });
    expect((await new KeyTable(store).get('key_raced'))?.revoked_at).toBe(T + 10);
  });
});

const endpoint = (o: Partial<EndpointRecord>): EndpointRecord => ({
  id: 'ep_raced',
  environment: 'production',
  url: 'https://hooks.example/in',
  events: ['*'],
  secret: `whsec_${'A'.repeat(32)}`,
  previous_secret: '',
  previous_secret_until: null,
  status: 'enabled',
  created_at: T,
  first_410_at: null,
  disabled_at: null,
  updated_at: T,
  ...o,
});

describe('a deleted webhook endpoint read from storage', () => {
  const box = new SecretBox(randomBytes(32));

  it('stays deleted under a later version that does not carry the delete, merged or not', async () => {
    const store = await fresh('deletions_live');
    const table = new EndpointTable(store, box);
    await table.put(endpoint({ updated_at: T + 1 }));
    await table.put(endpoint({ status: 'deleted', disabled_at: T + 10, updated_at: T + 10 }));
    await table.put(endpoint({ status: 'disabled', events: ['wake.error'], disabled_at: T + 20, updated_at: T + 20 }));
    const check = async () => {
      const [all] = await table.changedSince(0);
      expect(all?.status).toBe('deleted');
      expect(all?.disabled_at).toBe(T + 10);
      expect((await table.changedSince(T + 15)).map((e) => e.status)).toEqual(['deleted']);
      expect(await table.changedSince(T + 21)).toEqual([]);
    };
    await check();
    await store.client.command({ query: `OPTIMIZE TABLE ${store.db}.webhook_endpoints FINAL` });
    await check();
  });

  it('migration 20 keeps the deletes of versions stored before it', async () => {
    const store = await fresh('deletions_upgrade', 19);
    const insert = (e: EndpointRecord) =>
      store.client.insert({
        table: `${store.db}.webhook_endpoints`,
        format: 'JSONEachRow',
        values: [{ ...e, secret: box.seal(e.secret, e.id) }],
      });
    // Both versions of the race, stored by the version before this one.
    await insert(endpoint({ status: 'deleted', disabled_at: T + 10, updated_at: T + 10 }));
    await insert(endpoint({ updated_at: T + 20 }));
    await migrate(store);
    await store.client.command({ query: `OPTIMIZE TABLE ${store.db}.webhook_endpoints FINAL` });
    expect((await new EndpointTable(store, box).changedSince(0)).map((e) => e.status)).toEqual(['deleted']);
  });
});
