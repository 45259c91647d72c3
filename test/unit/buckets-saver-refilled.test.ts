import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { RateLimiter } from '../../src/ratelimit/limiter.js';
import { BUCKETS_FILE, bucketsSaver, decodeBuckets } from '../../src/ratelimit/persist.js';
import { allocateBuckets, SharedBuckets } from '../../src/ratelimit/shared-buckets.js';
import { keyRecord } from '../helpers/keys.js';

const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);

// A bucket that is full again (so not written) but not yet swept (the sweep runs every
// 10 s, the saver every 5 s) is found in place by the next decision: no claim, so the
// saver's `claims === emptyAt` shortcut never looks at the table again. The key's
// spending is never saved, for as long as no other bucket is claimed.
it('saves spending on a bucket found in place after an empty table was written', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'review-conc-saver-'));
  let now = T0;
  const layout = allocateBuckets(1000, 1024);
  const l = new RateLimiter(loadConfig({ values: {} }), layout);
  const k = keyRecord('one-key', 'production', { limit: 100_000, burst: 10, window: 'minute' });
  const saver = bucketsSaver({ layout, dir, now: () => now, log: silentLogger });
  try {
    expect(l.check(k, '1.1.1.1', null, now).allowed).toBe(true);
    expect(await saver.save()).toBe(true);
    // Idle past the bucket's refill and its minute window; no sweep yet.
    now += 61_000;
    expect(await saver.save()).toBe(true); // writes the empty table (emptyAt = claims)
    // The same key comes back and spends its whole burst (bucket found in place).
    for (let i = 0; i < 10; i++) expect(l.check(k, '1.1.1.1', null, now).allowed).toBe(true);
    expect(l.check(k, '1.1.1.1', null, now).allowed).toBe(false);
    expect(new SharedBuckets(layout).size(now)).toBe(1);
    // Several save periods later, a crash: what does the file hold?
    for (let i = 0; i < 4; i++) {
      now += 1_000;
      l.check(k, '1.1.1.1', null, now);
      await saver.save();
    }
    const back = decodeBuckets(readFileSync(join(dir, BUCKETS_FILE)), 1000, 1024, now);
    expect(new SharedBuckets(back ?? layout).size(now)).toBe(1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
