import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { RateLimiter } from '../../src/ratelimit/limiter.js';
import { BUCKETS_FILE, bucketsSaver, decodeBuckets } from '../../src/ratelimit/persist.js';
import { allocateBuckets, SharedBuckets } from '../../src/ratelimit/shared-buckets.js';
import { keyRecord } from '../helpers/keys.js';

const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
const DAY = 86_400_000;

describe('the bucket-table saver', () => {
  it('writes the table only when it changed: buckets waiting out a quota window with no request are not written again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-saver-'));
    const file = join(dir, BUCKETS_FILE);
    let now = T0;
    const layout = allocateBuckets(1000, 1024);
    const l = new RateLimiter(loadConfig({ values: {} }), layout);
    // A daily quota: the key's bucket is held (its count) until the day is over.
    const k = keyRecord('saver', 'production', { limit: 1000, burst: 10, window: 'day' });
    const saver = bucketsSaver({ layout, dir, now: () => now, log: silentLogger });
    const entries = () => readFileSync(file).readUInt32LE(16);
    try {
      // An empty table is written once, then not looked at while no bucket enters.
      expect(await saver.save()).toBe(true);
      expect(entries()).toBe(0);
      expect(await saver.save()).toBe(false);
      expect(l.check(k, '1.1.1.1', null, now).allowed).toBe(true);
      expect(await saver.save()).toBe(true);
      expect(entries()).toBe(1);
      const written = statSync(file).mtimeMs;
      // No request for a minute, then an hour: the bucket is full again but its day's count
      // is still held, so the table is not empty; it did not change, and is not written.
      now += 60_000;
      expect(await saver.save()).toBe(false);
      now += 3_600_000;
      expect(await saver.save()).toBe(false);
      expect(statSync(file).mtimeMs).toBe(written);
      // A decision changes it (the count, the tokens): written at the next save.
      expect(l.check(k, '1.1.1.1', null, now).allowed).toBe(true);
      expect(await saver.save()).toBe(true);
      const back = decodeBuckets(readFileSync(file), 1000, 1024, now);
      expect(back).not.toBeNull();
      expect(new SharedBuckets(back ?? layout).size(now)).toBe(1);
      expect(await saver.save()).toBe(false);
      // The day over, the bucket is gone: the file changes once more, to an empty table.
      now = T0 + DAY + 1;
      expect(await saver.save()).toBe(true);
      expect(entries()).toBe(0);
      new SharedBuckets(layout).sweep(now);
      expect(await saver.save()).toBe(false);
    } finally {
      await saver.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
