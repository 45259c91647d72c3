// Regression tests from a review of rate-limit persistence (2026-11-28).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { loadConfig } from '../../src/config/index.js';
import type { Logger } from '../../src/log.js';
import { silentLogger } from '../../src/log.js';
import { RateLimiter } from '../../src/ratelimit/limiter.js';
import { BUCKETS_FILE, bucketsSaver, restoredBuckets } from '../../src/ratelimit/persist.js';
import { keyRecord } from '../helpers/keys.js';

const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
// The file as persist.ts writes it: a header of 28 bytes, then buckets of 56 (four Int32:
// hash, quota level and count; five Float64: tokens, last refill, burst, rate, quota window).
const HEAD = 28;
const TOKENS = 16;
const LAST_REFILL = 24;
const RATE = 40;
// One token a second, ten at most: a bucket emptied now holds one again in a second.
const POLICY = { limit: 60, burst: 10, window: 'minute' } as const;
const ONE_TOKEN_MS = 1_000;

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'wakegate-damaged-buckets-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const config = () =>
  loadConfig({ values: { storage: { data_dir: dir }, ratelimit: { max_buckets: 1000, sketch_cells: 1024 } }, env: {} });

/** A logger keeping its warnings. */
function warnings(): { log: Logger; said: string[] } {
  const said: string[] = [];
  return { log: { ...silentLogger, warn: (m) => said.push(m) }, said };
}

/**
 * Saves (the saver's own path) the table of a gateway whose key spent its whole burst at
 * T0, then sets the first bucket's Float64s at the `edits`' offsets in the file: the header
 * and the length stay as they were, as a buggy writer or bytes changed on disk leave them.
 */
async function savedThenEdited(k: KeyRecord, ...edits: [field: number, value: number][]): Promise<void> {
  const cfg = config();
  const l = new RateLimiter(cfg);
  for (let i = 0; i < POLICY.burst; i++) expect(l.check(k, '1.1.1.1', null, T0).allowed).toBe(true);
  expect(l.check(k, '1.1.1.1', null, T0).allowed).toBe(false);
  const saver = bucketsSaver({ layout: l.layout, dir, now: () => T0, log: silentLogger });
  expect(await saver.save()).toBe(true);
  await saver.close();
  const file = join(dir, BUCKETS_FILE);
  const bytes = readFileSync(file);
  expect(bytes.readUInt32LE(16)).toBe(1);
  for (const [field, value] of edits) bytes.writeDoubleLE(value, HEAD + field);
  writeFileSync(file, bytes);
}

/** The limiter a start at `now` restores from the file (and the warnings said). */
function restarted(now: number): { l: RateLimiter; said: string[] } {
  const cfg = config();
  const { log, said } = warnings();
  return { l: new RateLimiter(cfg, restoredBuckets(cfg, now, log)), said };
}

const allowedAt = (l: RateLimiter, k: KeyRecord, now: number, n = 1_000): number => {
  let ok = 0;
  for (let i = 0; i < n; i++) if (l.check(k, '1.1.1.1', null, now).allowed) ok++;
  return ok;
};

describe('a buckets file holding values out of range', () => {
  it('a large negative token count is restored as an empty bucket: the key waits one token, not days', async () => {
    const k = keyRecord('deep-debt', 'production', POLICY);
    // A million tokens owed: eleven days of 429s at one a second.
    await savedThenEdited(k, [TOKENS, -1_000_000]);
    const { l } = restarted(T0);
    const refused = l.check(k, '1.1.1.1', null, T0);
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfter).toBeLessThan(60);
    expect(l.check(k, '1.1.1.1', null, T0 + ONE_TOKEN_MS).allowed).toBe(true);
    // And its whole burst (no more) once a bucket emptied then is surely full again.
    expect(allowedAt(l, k, T0 + ONE_TOKEN_MS + 2 * POLICY.burst * ONE_TOKEN_MS)).toBe(POLICY.burst);
  });

  it('a large negative token count with a bucket rate near zero: the key still refills at its policy', async () => {
    const k = keyRecord('slow-rate', 'production', POLICY);
    await savedThenEdited(k, [TOKENS, -1_000_000], [RATE, 1e-300]);
    const { l } = restarted(T0);
    expect(l.check(k, '1.1.1.1', null, T0 + ONE_TOKEN_MS).allowed).toBe(true);
  });

  it('a token count above the burst gives no more than the burst', async () => {
    const k = keyRecord('too-many', 'production', POLICY);
    await savedThenEdited(k, [TOKENS, 1_000_000]);
    expect(allowedAt(restarted(T0).l, k, T0)).toBe(POLICY.burst);
  });

  it.each([
    ['NaN', Number.NaN],
    ['+Infinity', Number.POSITIVE_INFINITY],
    ['-Infinity', Number.NEGATIVE_INFINITY],
  ])('a token count of %s is no bucket: the key has its burst, and no more', async (_name, value) => {
    const k = keyRecord('not-a-number', 'production', POLICY);
    await savedThenEdited(k, [TOKENS, value]);
    expect(allowedAt(restarted(T0).l, k, T0)).toBe(POLICY.burst);
  });

  it('a last refill far in the future refills from the start, not from then', async () => {
    const k = keyRecord('future', 'production', POLICY);
    await savedThenEdited(k, [LAST_REFILL, T0 + 100 * 365 * 86_400_000]);
    const { l } = restarted(T0);
    expect(l.check(k, '1.1.1.1', null, T0).allowed).toBe(false);
    expect(l.check(k, '1.1.1.1', null, T0 + ONE_TOKEN_MS).allowed).toBe(true);
  });

  it('a last refill past any date (1e300) is no bucket: the key has its burst, and no more', async () => {
    const k = keyRecord('past-any-date', 'production', POLICY);
    await savedThenEdited(k, [LAST_REFILL, 1e300]);
    expect(allowedAt(restarted(T0).l, k, T0)).toBe(POLICY.burst);
  });

  it('a restore that finds a bucket out of range says so once', async () => {
    const k = keyRecord('said', 'production', POLICY);
    await savedThenEdited(k, [TOKENS, -1_000_000]);
    expect(restarted(T0).said).toHaveLength(1);
  });

  it('a file whose length does not match its header is said once and ignored: fresh buckets', async () => {
    const k = keyRecord('torn', 'production', POLICY);
    await savedThenEdited(k, [TOKENS, 0]);
    const file = join(dir, BUCKETS_FILE);
    writeFileSync(file, readFileSync(file).subarray(0, HEAD + 30));
    const { l, said } = restarted(T0);
    expect(said).toHaveLength(1);
    expect(allowedAt(l, k, T0)).toBe(POLICY.burst);
  });
});
