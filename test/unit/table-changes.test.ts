import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { follow, TableChanges } from '../../src/store/changes.js';

/** A read that answers when told: `ok` true or false. */
function reads() {
  const pending: ((ok: boolean) => void)[] = [];
  let n = 0;
  return {
    read: () => {
      n++;
      return new Promise<boolean>((resolve) => pending.push(resolve));
    },
    count: () => n,
    answer: async (ok: boolean) => {
      pending.shift()?.(ok);
      await vi.advanceTimersByTimeAsync(0);
    },
  };
}

describe('following a table', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('on the embedded store reads nothing while nothing is written, and reads after a write', async () => {
    const changes = new TableChanges();
    const r = reads();
    const stop = follow({ table: 'api_keys', changes, everyMs: 1000, read: r.read });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(r.count()).toBe(0);
    changes.changed('webhook_endpoints');
    expect(r.count()).toBe(0);
    changes.changed('api_keys');
    expect(r.count()).toBe(1);
    await r.answer(true);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(r.count()).toBe(1);
    stop();
    changes.changed('api_keys');
    expect(r.count()).toBe(1);
  });

  it('reads again after a read that a write overtook, once for several writes', async () => {
    const changes = new TableChanges();
    const r = reads();
    follow({ table: 'api_keys', changes, everyMs: 1000, read: r.read });
    changes.changed('api_keys');
    changes.changed('api_keys');
    changes.changed('api_keys');
    expect(r.count()).toBe(1);
    await r.answer(true);
    expect(r.count()).toBe(2);
    await r.answer(true);
    expect(r.count()).toBe(2);
  });

  it('retries a failed read every everyMs until one succeeds, then stops', async () => {
    const changes = new TableChanges();
    const r = reads();
    follow({ table: 'api_keys', changes, everyMs: 1000, read: r.read });
    changes.changed('api_keys');
    await r.answer(false);
    await vi.advanceTimersByTimeAsync(999);
    expect(r.count()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(r.count()).toBe(2);
    await r.answer(false);
    await vi.advanceTimersByTimeAsync(1000);
    expect(r.count()).toBe(3);
    await r.answer(true);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(r.count()).toBe(3);
  });

  it('without changes (a ClickHouse server others write) polls every everyMs', async () => {
    const r = reads();
    const stop = follow({ table: 'api_keys', changes: null, everyMs: 1000, read: r.read });
    await vi.advanceTimersByTimeAsync(3000);
    expect(r.count()).toBe(3);
    stop();
    await vi.advanceTimersByTimeAsync(3000);
    expect(r.count()).toBe(3);
  });
});
