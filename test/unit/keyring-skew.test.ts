import { describe, expect, it, vi } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { KeyRing } from '../../src/auth/keyring.js';
import { createLogger } from '../../src/log.js';
import type { KeyTable } from '../../src/store/keys.js';
import { keyRecord } from '../helpers/keys.js';

/**
 * The key poll (the backstop for a revocation whose announcement was missed: Redis down,
 * publish failed, subscriber reconnecting) reads the keys written since its watermark,
 * and updated_at is stamped by the writing instance's own clock. It read 5 s back from
 * the newest stamp it had seen, so one instance whose clock ran more than 5 s ahead (or
 * this one's) hid every revocation the others stamped meanwhile.
 */
function storage() {
  const rows = new Map<string, KeyRecord>();
  const table = {
    changedSince: async (since: number) => [...rows.values()].filter((k) => k.updated_at >= since),
    // Each revoked row stands for one stored revocation (they are never removed).
    revocationCount: async () => [...rows.values()].filter((k) => k.revoked_at !== null || k.revoke_at !== null).length,
    allRevocations: async () =>
      new Map(
        [...rows.values()]
          .filter((k) => k.revoked_at !== null || k.revoke_at !== null)
          .map((k) => [k.id, { revoke_at: k.revoke_at, revoked_at: k.revoked_at, written_at: k.updated_at }]),
      ),
    get: async (id: string) => rows.get(id) ?? null,
    writeUsage: async () => {},
  } as unknown as KeyTable;
  return { rows, table };
}

describe('the key poll under clock skew between instances', () => {
  it('a revocation made by an instance with a correct clock reaches a ring that read a row from a clock 30 s ahead', async () => {
    const { rows, table } = storage();
    const now = Date.now();
    const y: KeyRecord = { ...keyRecord('key_y'), updated_at: now - 60_000, created_at: now - 60_000 };
    rows.set(y.id, y);
    const ring = new KeyRing(table, createLogger('silent'));
    await ring.load();
    expect(ring.get('key_y')?.revoked_at).toBeNull();

    // Instance A (clock 30 s ahead) creates key_x; this ring's poll reads it.
    const x: KeyRecord = { ...keyRecord('key_x'), updated_at: now + 30_000, created_at: now + 30_000 };
    rows.set(x.id, x);
    await ring.poll();
    expect(ring.get('key_x')).toBeDefined();

    // Instance C (correct clock) revokes key_y; its announcement never arrives here (Redis away).
    const t = Date.now();
    rows.set(y.id, { ...y, revoked_at: t, updated_at: Math.max(t, y.updated_at + 1) });

    // Two seconds of polls (SPEC: revocation within 2 s; DESIGN: the key poll is the backstop).
    for (let i = 0; i < 4; i++) await ring.poll();
    expect(ring.get('key_y')?.revoked_at).not.toBeNull();
  });

  it("a ring whose own instance's clock is 30 s ahead still reads another instance's revocation", async () => {
    const { rows, table } = storage();
    const now = Date.now();
    const y: KeyRecord = { ...keyRecord('key_y'), updated_at: now - 60_000 };
    rows.set(y.id, y);
    const ring = new KeyRing(table, createLogger('silent'));
    await ring.load();
    // This instance writes a key with its own (fast) clock: KeyService.save -> table.put + ring.apply.
    const mine: KeyRecord = { ...keyRecord('key_mine'), updated_at: now + 30_000 };
    rows.set(mine.id, mine);
    ring.apply(mine);
    // Another instance revokes key_y; the announcement is missed.
    const t = Date.now();
    rows.set(y.id, { ...y, revoked_at: t, updated_at: t });
    for (let i = 0; i < 4; i++) await ring.poll();
    expect(ring.get('key_y')?.revoked_at).not.toBeNull();
  });

  it('a revocation stamped by an instance whose clock is 10 minutes behind (past the poll window) still reaches the ring', async () => {
    const { rows, table } = storage();
    const now = Date.now();
    const y: KeyRecord = { ...keyRecord('key_y'), updated_at: now - 86_400_000, created_at: now - 86_400_000 };
    const fresh: KeyRecord = { ...keyRecord('key_fresh'), updated_at: now };
    rows.set(y.id, y);
    rows.set(fresh.id, fresh);
    const ring = new KeyRing(table, createLogger('silent'));
    await ring.load();
    const behind = now - 600_000;
    rows.set(y.id, { ...y, revoked_at: behind, updated_at: Math.max(behind, y.updated_at + 1) });
    await ring.poll();
    expect(ring.get('key_y')?.revoked_at).toBe(behind);
    // Read once: a poll with no new revocation reads none of them again.
    const spy = vi.spyOn(table, 'allRevocations');
    await ring.poll();
    expect(spy).not.toHaveBeenCalled();
  });
});
