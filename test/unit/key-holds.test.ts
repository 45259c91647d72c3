import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { KeyHolds } from '../../src/auth/key-holds.js';
import { KeyRing } from '../../src/auth/keyring.js';
import { createLogger, silentLogger } from '../../src/log.js';
import { keyRecord } from '../helpers/keys.js';

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A ring (an edge thread's copy) telling `holds` of every version it applies, as the roots build them. */
function ringWithHolds() {
  const holds = new KeyHolds(() => Date.now(), silentLogger);
  const ring = new KeyRing(null, silentLogger, null, (k) => holds.applied(k));
  return { holds, ring };
}

describe('what a key holds open is cut when the key is revoked (KeyHolds)', () => {
  it('a revocation the ring applies cuts every hold of that key, and only of that key', () => {
    const { holds, ring } = ringWithHolds();
    const a: KeyRecord = { ...keyRecord('key_a'), updated_at: 1 };
    const b: KeyRecord = { ...keyRecord('key_b'), updated_at: 1 };
    ring.apply(a);
    ring.apply(b);
    const cut: string[] = [];
    holds.hold(a, () => cut.push('a1'));
    holds.hold(a, () => cut.push('a2'));
    holds.hold(b, () => cut.push('b1'));
    expect(holds.size).toBe(2);
    // A version that changes something else cuts nothing.
    ring.apply({ ...a, tls_fingerprint: 'f'.repeat(64), updated_at: 2 });
    expect(cut).toEqual([]);
    ring.apply({ ...a, revoked_at: Date.now(), updated_at: 3 });
    expect(cut).toEqual(['a1', 'a2']);
    expect(holds.size).toBe(1);
    // Applied again (the poll reads it once more): nothing is cut twice.
    ring.apply({ ...a, revoked_at: Date.now(), updated_at: 3 });
    expect(cut).toEqual(['a1', 'a2']);
  });

  it('a hold let go is never cut, and a key with nothing held left is forgotten', () => {
    const { holds, ring } = ringWithHolds();
    const a = keyRecord('key_a');
    const cut: string[] = [];
    const release = holds.hold(a, () => cut.push('a'));
    release();
    release();
    expect(holds.size).toBe(0);
    ring.apply({ ...a, revoked_at: Date.now(), updated_at: 5 });
    expect(cut).toEqual([]);
  });

  it('a scheduled revocation cuts when it comes due, not before; one brought forward by a later version too', async () => {
    const { holds, ring } = ringWithHolds();
    const a: KeyRecord = { ...keyRecord('key_a'), revoke_at: Date.now() + 150, updated_at: 1 };
    const b: KeyRecord = { ...keyRecord('key_b'), revoke_at: Date.now() + 60_000, updated_at: 1 };
    const cut: [string, number][] = [];
    holds.hold(a, () => cut.push(['a', Date.now()]));
    holds.hold(b, () => cut.push(['b', Date.now()]));
    await tick(50);
    expect(cut).toEqual([]);
    // b's revocation is brought forward (revoke now, or sooner): re-armed from the new version.
    ring.apply({ ...b, revoke_at: Date.now() + 30, updated_at: 2 });
    await tick(200);
    expect(cut.map(([k]) => k).sort()).toEqual(['a', 'b']);
    expect((cut.find(([k]) => k === 'a') as [string, number])[1]).toBeGreaterThanOrEqual(a.revoke_at as number);
    expect(holds.size).toBe(0);
  });

  it('a revocation years away arms no timer that fires early (timers wait at most 24.8 days)', async () => {
    const holds = new KeyHolds(() => Date.now(), silentLogger);
    const cut: string[] = [];
    const release = holds.hold({ ...keyRecord('key_a'), revoke_at: Date.parse('2099-01-01') }, () => cut.push('a'));
    await tick(30);
    expect(cut).toEqual([]);
    release();
  });

  it('a key already revoked when held is cut at once', () => {
    const holds = new KeyHolds(() => Date.now(), silentLogger);
    const cut: string[] = [];
    holds.hold({ ...keyRecord('key_a'), revoked_at: Date.now() - 1 }, () => cut.push('a'));
    expect(cut).toEqual(['a']);
    expect(holds.size).toBe(0);
  });

  it('a cut that throws is logged; the other holds are cut and the ring still holds the version', () => {
    const lines: string[] = [];
    const holds = new KeyHolds(
      () => Date.now(),
      createLogger('error', (l) => lines.push(l)),
    );
    const ring = new KeyRing(null, silentLogger, null, (k) => holds.applied(k));
    const a = keyRecord('key_a');
    ring.apply(a);
    const cut: string[] = [];
    holds.hold(a, () => {
      throw new Error('boom');
    });
    holds.hold(a, () => cut.push('second'));
    const revoked = { ...a, revoked_at: Date.now(), updated_at: 9 };
    ring.apply(revoked);
    expect(cut).toEqual(['second']);
    expect(ring.get('key_a')).toEqual(revoked);
    expect(lines.join('')).toContain('cutting what a revoked key held failed');
  });
});
