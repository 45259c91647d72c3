import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { watchProgress } from '../../src/threads/stall.js';

/**
 * A slow client is cut when it takes nothing for a whole window; a window in which the
 * gateway itself was late (its loop busy) is not held against the client (CI saw a
 * reading client cut on a loaded machine).
 */
describe('watchProgress', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] }));
  afterEach(() => vi.useRealTimers());

  const setup = (fromNow = true) => {
    let t = 0;
    let progress = 0;
    let stalled = 0;
    const stop = watchProgress(
      () => progress,
      100,
      () => stalled++,
      { fromNow, now: () => t },
    );
    /** One tick of the watch, `late` ms after it was due. */
    const tick = (late = 0) => {
      t += 100 + late;
      vi.advanceTimersByTime(100);
    };
    return { tick, stop, more: () => progress++, stalled: () => stalled };
  };

  it('cuts after one window without progress, not while bytes move', () => {
    const w = setup();
    w.more();
    w.tick();
    w.more();
    w.tick();
    expect(w.stalled()).toBe(0);
    w.tick();
    expect(w.stalled()).toBe(1);
    w.tick();
    expect(w.stalled()).toBe(1);
  });

  it('does not judge a window the process was late for, and judges the next one', () => {
    const w = setup();
    w.tick(400);
    expect(w.stalled()).toBe(0);
    w.tick(40);
    expect(w.stalled()).toBe(1);
  });

  it('fromNow false: the first tick only takes the baseline', () => {
    const w = setup(false);
    w.tick();
    expect(w.stalled()).toBe(0);
    w.tick();
    expect(w.stalled()).toBe(1);
  });

  it('stops when told', () => {
    const w = setup();
    w.stop();
    w.tick();
    w.tick();
    expect(w.stalled()).toBe(0);
  });
});
