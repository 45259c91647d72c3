// A key's last use in the ring when the clock steps back: an edge thread's use recorded at the corrected time (2026-11-28).
import { describe, expect, it } from 'vitest';
import { KeyRing } from '../../src/auth/keyring.js';
import { silentLogger } from '../../src/log.js';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const HOUR = 3_600_000;

describe('KeyRing.used (an edge thread hands its uses to the control thread)', () => {
  it('a use an hour earlier than the one held (the clock stepped back) is the last use, and is written', () => {
    const ring = new KeyRing(null, silentLogger);
    ring.used('k', T0 + HOUR);
    ring.takeUsage();
    ring.used('k', T0 + 60_000);
    expect(ring.lastUsedInMemory('k')).toBe(T0 + 60_000);
    expect(ring.takeUsage()).toEqual(new Map([['k', T0 + 60_000]]));
  });

  it('a batch a moment old from another thread does not move the last use back', () => {
    const ring = new KeyRing(null, silentLogger);
    ring.used('k', T0 + 2_000);
    ring.takeUsage();
    ring.used('k', T0 + 1_000);
    expect(ring.lastUsedInMemory('k')).toBe(T0 + 2_000);
    expect(ring.takeUsage().size).toBe(0);
  });

  it('touch (this thread) records the corrected time too', () => {
    const ring = new KeyRing(null, silentLogger);
    ring.touch('k', T0 + HOUR + 123);
    ring.touch('k', T0 + 60_456);
    expect(ring.lastUsedInMemory('k')).toBe(T0 + 60_000);
  });
});
