import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isRevoked } from '../../src/auth/authorize.js';
import type { KeyRecord } from '../../src/auth/key.js';
import { KeyRing } from '../../src/auth/keyring.js';
import { KeyService } from '../../src/auth/keys-service.js';
import { hashSecret, newKeySecret } from '../../src/auth/secrets.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/index.js';
import type { EventBus } from '../../src/events/bus.js';
import { silentLogger } from '../../src/log.js';
import type { KeyTable } from '../../src/store/keys.js';

/** A key table in memory: what storage keeps across starts (latest version of each key). */
function memoryTable(): KeyTable & { rows: Map<string, KeyRecord> } {
  const rows = new Map<string, KeyRecord>();
  return {
    rows,
    put: async (k: KeyRecord) => {
      const held = rows.get(k.id);
      if (!held || held.updated_at <= k.updated_at) rows.set(k.id, { ...k });
    },
    changedSince: async () => [...rows.values()].map((k) => ({ ...k })),
    revocationCount: async () => 0,
    allRevocations: async () => new Map(),
    get: async (id: string) => rows.get(id) ?? null,
    byHash: async (h: string) => [...rows.values()].find((k) => k.secret_hash === h) ?? null,
    count: async () => rows.size,
    writeUsage: async () => {},
    lastUsedMany: async () => new Map(),
  } as unknown as KeyTable & { rows: Map<string, KeyRecord> };
}

const cfg = loadConfig({ values: {}, env: {} });

/** One start of a gateway on `table`: a fresh ring and service, then the bootstrap. */
async function startOnce(table: KeyTable, clock: ManualClock, secret: string | null, events: { type: string }[]) {
  const ring = new KeyRing(table, silentLogger);
  await ring.load();
  const bus = { emit: (type: string) => events.push({ type }) } as unknown as EventBus;
  const svc = new KeyService({ cfg, table, ring, events: bus, clock, log: silentLogger });
  return { ring, boot: await svc.bootstrap(secret) };
}

describe('the bootstrap admin key across starts (property)', () => {
  it('whatever WAKEGATE_ADMIN_KEY each start is given, one bootstrap key is active: the newest value not yet revoked', async () => {
    const pool = [newKeySecret('live'), newKeySecret('live'), newKeySecret('live')];
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.option(fc.constantFrom(...pool), { nil: null }), { minLength: 1, maxLength: 8 }),
        async (starts) => {
          const table = memoryTable();
          const clock = new ManualClock(Date.UTC(2026, 10, 25));
          const events: { type: string }[] = [];
          /** The model: the secret in force, and the values ever installed. */
          let current: string | null = null;
          const installed = new Set<string>();
          let rotations = 0;
          for (const v of starts) {
            clock.advance(1000);
            const { ring, boot } = await startOnce(table, clock, v, events);
            if (v === null) {
              if (current === null) {
                expect(boot.secret).not.toBeNull();
                current = boot.secret;
              } else expect(boot.created).toBeNull();
            } else if (!installed.has(v)) {
              expect(boot.created?.secret_hash).toBe(hashSecret(v));
              if (current !== null) rotations++;
              installed.add(v);
              current = v;
            } else {
              // Installed before: in force (nothing changes) or revoked (kept out).
              expect(boot.created).toBeNull();
              expect(boot.replaced).toEqual([]);
            }
            const now = clock.now();
            const active = [...table.rows.values()].filter((k) => k.bootstrap === true && !isRevoked(k, now));
            expect(active).toHaveLength(1);
            expect(active[0]?.secret_hash).toBe(hashSecret(current as string));
            // The ring the proxy reads agrees: the secret in force works, every other one is refused.
            expect(isRevoked(ring.bySecret(current as string) as KeyRecord, now)).toBe(false);
            for (const s of installed)
              if (s !== current) expect(isRevoked(ring.bySecret(s) as KeyRecord, now)).toBe(true);
          }
          expect(events.filter((e) => e.type === 'key.rotated')).toHaveLength(rotations);
          expect(events.filter((e) => e.type === 'key.revoked')).toHaveLength(rotations);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('a store from before the marker: the admin keys an earlier version piled up are all revoked by the next new value', async () => {
    const table = memoryTable();
    const clock = new ManualClock(Date.UTC(2026, 10, 25));
    const old = [newKeySecret('live'), newKeySecret('live')];
    for (const s of old) {
      clock.advance(1000);
      await startOnce(table, clock, s, []);
    }
    // As an earlier version left them: unmarked (the column default of rows from before migration 15), none replaced, none revoked.
    for (const k of table.rows.values())
      table.rows.set(k.id, { ...k, bootstrap: undefined, revoked_at: null, replaces: null });
    clock.advance(1000);
    const events: { type: string }[] = [];
    const fresh = newKeySecret('live');
    const { boot } = await startOnce(table, clock, fresh, events);
    expect(boot.replaced).toHaveLength(2);
    const active = [...table.rows.values()].filter((k) => !isRevoked(k, clock.now()));
    expect(active.map((k) => k.secret_hash)).toEqual([hashSecret(fresh)]);
    expect(events.map((e) => e.type).sort()).toEqual(['key.revoked', 'key.revoked', 'key.rotated']);
  });

  // Regression test: a fleet started at once on one storage (migrate-concurrent.test.ts
  // failed about one run in five with 401). One instance's ring was loaded before
  // another stored the key of the same WAKEGATE_ADMIN_KEY; the bootstrap found that key
  // in storage, had nothing to change in it, and left its own ring without it: the
  // admin was refused on that instance until the next poll.
  it('a key of the same secret stored by another instance after this ring was loaded is in force here at once', async () => {
    const table = memoryTable();
    const clock = new ManualClock(Date.UTC(2026, 10, 25));
    const secret = newKeySecret('live');
    const ring = new KeyRing(table, silentLogger);
    await ring.load();
    // Another instance, started at the same moment, stores the key first.
    await startOnce(table, clock, secret, []);
    const bus = { emit: () => {} } as unknown as EventBus;
    const svc = new KeyService({ cfg, table, ring, events: bus, clock, log: silentLogger });
    const boot = await svc.bootstrap(secret);
    expect(boot.created).toBeNull();
    const held = ring.bySecret(secret);
    expect(held?.secret_hash).toBe(hashSecret(secret));
    expect(isRevoked(held as KeyRecord, clock.now())).toBe(false);
    expect(table.rows.size).toBe(1);
  });
});
