import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Wal } from '../../src/capture/wal.js';
import { replaceFile } from '../../src/durable.js';
import { silentLogger } from '../../src/log.js';
import { writeAtomic } from '../../src/ratelimit/persist.js';

/**
 * Every call the code under test makes to node:fs that matters for durability, in
 * order: node:fs's own functions wrapped, and its ESM exports synced to them
 * (the sources are loaded by Node, not vitest, so vi.mock cannot reach them).
 */
const calls: string[] = [];
const paths = new Map<number, string>();
const fs = createRequire(import.meta.url)('node:fs') as typeof import('node:fs');
const orig = { ...fs };
const wrapped = {
  openSync: (p: string, ...rest: unknown[]) => {
    const fd = (orig.openSync as (...a: unknown[]) => number)(p, ...rest);
    paths.set(fd, String(p));
    return fd;
  },
  open: (p: string, flags: string, cb: (e: Error | null, fd: number) => void) =>
    orig.open(p, flags, (e, fd) => {
      if (!e) paths.set(fd, String(p));
      cb(e, fd);
    }),
  fsyncSync: (fd: number) => {
    calls.push(`fsync ${paths.get(fd)}`);
    orig.fsyncSync(fd);
  },
  fsync: (fd: number, cb: (e: Error | null) => void) => {
    calls.push(`fsync ${paths.get(fd)}`);
    orig.fsync(fd, cb);
  },
  renameSync: (a: string, b: string) => {
    calls.push(`rename ${a} ${b}`);
    orig.renameSync(a, b);
  },
};
beforeAll(() => {
  Object.assign(fs, wrapped);
  syncBuiltinESMExports();
});
afterAll(() => {
  for (const k of Object.keys(wrapped)) (fs as Record<string, unknown>)[k] = (orig as Record<string, unknown>)[k];
  syncBuiltinESMExports();
});

describe('durable files: names as well as bytes survive a power loss', () => {
  it('replaceFile: the temporary file is synced before the rename, the directory after it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-durable-'));
    calls.length = 0;
    replaceFile(join(dir, 'state'), Buffer.from('v1'));
    expect(calls).toEqual([
      `fsync ${join(dir, 'state.tmp')}`,
      `rename ${join(dir, 'state.tmp')} ${join(dir, 'state')}`,
      `fsync ${dir}`,
    ]);
    expect(readFileSync(join(dir, 'state'), 'utf8')).toBe('v1');
    expect((statSync(join(dir, 'state')).mode & 0o777).toString(8)).toBe('600');
  });

  it("a new write-ahead log segment's directory is synced; a segment written again is replaced durably", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-durable-wal-'));
    const wal = new Wal<{ n: number }>(
      dir,
      1_000_000,
      { syncIntervalMs: 10_000, fsyncIntervalMs: 10_000 },
      silentLogger,
    );
    calls.length = 0;
    wal.append({ n: 1 });
    wal.writePending();
    // The directory sync runs off the event loop.
    for (let i = 0; i < 100 && !calls.includes(`fsync ${dir}`); i++) await new Promise((r) => setTimeout(r, 5));
    expect(calls).toContain(`fsync ${dir}`);
    const sealed = wal.seal();
    expect(sealed).not.toBeNull();
    // Storage refused it, with rows a failed write kept: its file is written again whole.
    calls.length = 0;
    wal.keep(sealed?.token as string, [{ n: 1 }, { n: 2 }]);
    const seg = join(dir, sealed?.token as string);
    expect(calls).toEqual([`fsync ${seg}.tmp`, `rename ${seg}.tmp ${seg}`, `fsync ${dir}`]);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    wal.close();
  });

  it("the rate-limit table's file is written the same way", () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-durable-buckets-'));
    calls.length = 0;
    writeAtomic(dir, 'ratelimit-buckets.bin', Buffer.from([1, 2, 3]));
    expect(calls).toEqual([
      `fsync ${join(dir, 'ratelimit-buckets.bin.tmp')}`,
      `rename ${join(dir, 'ratelimit-buckets.bin.tmp')} ${join(dir, 'ratelimit-buckets.bin')}`,
      `fsync ${dir}`,
    ]);
  });

  it('a replacement that fails leaves the old file and no temporary one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-durable-fail-'));
    // The rename fails (the target is a non-empty directory; EXDEV, EACCES, EIO likewise).
    const path = join(dir, 'segment');
    mkdirSync(path);
    writeFileSync(join(path, 'x'), 'x');
    expect(() => replaceFile(path, Buffer.from('rows\n'))).toThrow();
    expect(existsSync(`${path}.tmp`)).toBe(false);
  });
});
