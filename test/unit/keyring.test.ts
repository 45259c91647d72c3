import { afterEach, describe, expect, it, vi } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { KeyRing } from '../../src/auth/keyring.js';
import { createLogger } from '../../src/log.js';
import { TableChanges } from '../../src/store/changes.js';
import type { KeyTable } from '../../src/store/keys.js';
import { keyRecord } from '../helpers/keys.js';

/** A ring over a table whose reads of one key answer only when the test says (`reads[i](version)`). */
function slowReads() {
  const reads: ((k: KeyRecord) => void)[] = [];
  const table = {
    get: () => new Promise<KeyRecord>((resolve) => reads.push(resolve)),
    changedSince: async () => [],
    revocationCount: async () => 0,
    allRevocations: async () => new Map(),
  } as unknown as KeyTable;
  return { ring: new KeyRing(table, createLogger('silent')), reads };
}

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * An announced revocation is in force at once; a storage read that was already on its
 * way (started before the revocation was stored) must not lift it when it lands.
 */
describe('the key ring against a stale read', () => {
  it('keeps an announced revocation when an older read of the key lands after it', async () => {
    const v1: KeyRecord = { ...keyRecord('key_a'), updated_at: 1000 };
    const v2: KeyRecord = { ...v1, revoked_at: 1900, updated_at: 2000 };
    const { ring, reads } = slowReads();
    ring.apply(v1);
    // A change (not a revocation) announced: its read leaves at once and is slow to answer.
    const first = ring.announced('key_a', 1500, false, 1800);
    await tick(5);
    expect(reads).toHaveLength(1);
    // The revocation announced meanwhile: refused here at once.
    await ring.announced('key_a', 2000, true, 1950);
    expect(ring.get('key_a')?.revoked_at).toBe(1950);
    // The slow read lands with the version before the revocation.
    reads[0]?.(v1);
    await tick(5);
    expect(ring.get('key_a')?.revoked_at).not.toBeNull();
    // The next read brings the stored revocation, which replaces the one made here.
    await tick(80);
    expect(reads).toHaveLength(2);
    reads[1]?.(v2);
    await first;
    expect(ring.get('key_a')).toEqual(v2);
  });
});

describe('the key ring against a stale read of a key it did not hold yet', () => {
  it('never serves a key whose revocation was announced while its first read was on its way', async () => {
    const v1: KeyRecord = { ...keyRecord('key_b'), updated_at: 1000 };
    const v2: KeyRecord = { ...v1, revoked_at: 1900, updated_at: 2000 };
    const { ring, reads } = slowReads();
    // The key's creation announced: its read leaves at once and is slow to answer.
    const first = ring.announced('key_b', 1000, false, 1100);
    await tick(5);
    expect(reads).toHaveLength(1);
    // Its revocation announced meanwhile: nothing held yet, so nothing to refuse here.
    await ring.announced('key_b', 2000, true, 1950);
    expect(ring.get('key_b')).toBeUndefined();
    // The slow read lands with the version before the revocation: held, but revoked.
    reads[0]?.(v1);
    await tick(5);
    expect(ring.get('key_b')?.revoked_at).toBe(1950);
    // The next read brings the stored revocation, which replaces the one made here.
    await tick(80);
    expect(reads).toHaveLength(2);
    reads[1]?.(v2);
    await first;
    expect(ring.get('key_b')).toEqual(v2);
    // A later version of the key (a new rotation, say) is taken as it is.
    const v3: KeyRecord = { ...v2, updated_at: 3000 };
    ring.apply(v3);
    expect(ring.get('key_b')).toEqual(v3);
  });
});

describe('the key ring against a stale read of a version between the held one and the revocation', () => {
  it('keeps an announced revocation when a read lands with a newer version made before it', async () => {
    const v1: KeyRecord = { ...keyRecord('key_c'), updated_at: 1000 };
    // A change stored after v1 (a new label, say), then the revocation.
    const v15: KeyRecord = { ...v1, label: 'renamed', updated_at: 1500 };
    const v2: KeyRecord = { ...v15, revoked_at: 1900, updated_at: 2000 };
    const { ring, reads } = slowReads();
    ring.apply(v1);
    const first = ring.announced('key_c', 1500, false, 1600);
    await tick(5);
    expect(reads).toHaveLength(1);
    await ring.announced('key_c', 2000, true, 1950);
    expect(ring.get('key_c')?.revoked_at).toBe(1950);
    // The read that left for the change lands with it: newer than held, older than the revocation.
    reads[0]?.(v15);
    await tick(5);
    expect(ring.get('key_c')?.label).toBe('renamed');
    expect(ring.get('key_c')?.revoked_at).toBe(1950);
    await tick(80);
    reads[1]?.(v2);
    await first;
    expect(ring.get('key_c')).toEqual(v2);
  });
});

describe('the key ring on the embedded store', () => {
  afterEach(() => vi.useRealTimers());

  it('reads keys only when one is written, and writes usage once 5 s after a use', async () => {
    vi.useFakeTimers();
    const changes = new TableChanges();
    let reads = 0;
    const written: Map<string, number>[] = [];
    let failWrite = false;
    const v1: KeyRecord = { ...keyRecord('key_a'), updated_at: 1000 };
    const table = {
      revocationCount: async () => 0,
      allRevocations: async () => new Map(),
      changedSince: async () => {
        reads++;
        return [v1];
      },
      writeUsage: async (u: Map<string, number>) => {
        if (failWrite) throw new Error('storage down');
        written.push(new Map(u));
      },
    } as unknown as KeyTable;
    const ring = new KeyRing(table, createLogger('silent'));
    ring.start(1000, 5000, changes);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(reads).toBe(0);
    expect(written).toEqual([]);
    changes.changed('api_keys');
    await vi.advanceTimersByTimeAsync(0);
    expect(reads).toBe(1);
    expect(ring.get('key_a')).toEqual(v1);
    ring.touch('key_a', 31_500);
    ring.touch('key_a', 31_700);
    await vi.advanceTimersByTimeAsync(4999);
    expect(written).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(written).toEqual([new Map([['key_a', 31_000]])]);
    // A write that fails is tried again 5 s later; nothing is written while nothing is used.
    failWrite = true;
    ring.touch('key_a', 40_000);
    await vi.advanceTimersByTimeAsync(5000);
    failWrite = false;
    await vi.advanceTimersByTimeAsync(5000);
    expect(written).toEqual([new Map([['key_a', 31_000]]), new Map([['key_a', 40_000]])]);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(written).toHaveLength(2);
    expect(reads).toBe(1);
    await ring.stop();
  });
});

/**
 * Two instances of a fleet each order only their own writes: one revokes a key while the
 * other stores a change built from the version before. The ring never lifts a revocation
 * or puts a schedule back, whichever version is newer.
 */
describe('the key ring against a newer version written from a stale copy', () => {
  it('keeps a revocation and the soonest revoke_at', () => {
    const { ring } = slowReads();
    const v1: KeyRecord = { ...keyRecord('key_b'), updated_at: 1000 };
    ring.apply({ ...v1, revoked_at: 1500, updated_at: 1500 });
    // Another instance's certificate change, from v1, stamped later.
    ring.apply({ ...v1, tls_fingerprint: 'ab'.repeat(32), updated_at: 1600 });
    expect(ring.get('key_b')).toMatchObject({ revoked_at: 1500, tls_fingerprint: 'ab'.repeat(32) });

    ring.apply({ ...keyRecord('key_c'), revoke_at: 5000, updated_at: 1000 });
    ring.apply({ ...keyRecord('key_c'), revoke_at: 9000, updated_at: 1100 });
    expect(ring.get('key_c')?.revoke_at).toBe(5000);
    ring.apply({ ...keyRecord('key_c'), revoke_at: null, updated_at: 1200 });
    expect(ring.get('key_c')?.revoke_at).toBe(5000);
    // Brought forward: taken.
    ring.apply({ ...keyRecord('key_c'), revoke_at: 3000, updated_at: 1300 });
    expect(ring.get('key_c')?.revoke_at).toBe(3000);
  });
});
