import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { KeyRing } from '../../src/auth/keyring.js';
import { createLogger } from '../../src/log.js';
import type { KeyTable } from '../../src/store/keys.js';
import { keyRecord } from '../helpers/keys.js';

/**
 * An announced revocation is in force at once; a storage read that was already on its
 * way (started before the revocation was stored) must not lift it when it lands.
 */
describe('the key ring against a stale read', () => {
  it('keeps an announced revocation when an older read of the key lands after it', async () => {
    const v1: KeyRecord = { ...keyRecord('key_a'), updated_at: 1000 };
    const v2: KeyRecord = { ...v1, revoked_at: 1900, updated_at: 2000 };
    const reads: ((k: KeyRecord) => void)[] = [];
    const table = {
      get: () => new Promise<KeyRecord>((resolve) => reads.push(resolve)),
      changedSince: async () => [],
    } as unknown as KeyTable;
    const ring = new KeyRing(table, createLogger('silent'));
    ring.apply(v1);
    // A change (not a revocation) announced: its read leaves at once and is slow to answer.
    const first = ring.announced('key_a', 1500, false, 1800);
    await new Promise((r) => setTimeout(r, 5));
    expect(reads).toHaveLength(1);
    // The revocation announced meanwhile: refused here at once.
    await ring.announced('key_a', 2000, true, 1950);
    expect(ring.get('key_a')?.revoked_at).toBe(1950);
    // The slow read lands with the version before the revocation.
    reads[0]?.(v1);
    await new Promise((r) => setTimeout(r, 5));
    expect(ring.get('key_a')?.revoked_at).not.toBeNull();
    // The next read brings the stored revocation, which replaces the one made here.
    await new Promise((r) => setTimeout(r, 80));
    expect(reads).toHaveLength(2);
    reads[1]?.(v2);
    await first;
    expect(ring.get('key_a')).toEqual(v2);
  });
});
