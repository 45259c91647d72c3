import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadSealingKey } from '../../src/seal.js';

/** DATA_DIR/secret.key, made on the first start when storage.encryption_key is not set. */
describe('the sealing key file', () => {
  const dirs: string[] = [];
  const dir = () => {
    const d = mkdtempSync(join(tmpdir(), 'wakegate-seal-'));
    dirs.push(d);
    return d;
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('is made whole (32 bytes, 0600, no temporary file left) and read back the same', () => {
    const d = dir();
    const k = loadSealingKey(null, d);
    expect(k).toHaveLength(32);
    expect(readFileSync(join(d, 'secret.key')).equals(k)).toBe(true);
    expect(statSync(join(d, 'secret.key')).mode & 0o777).toBe(0o600);
    expect(readdirSync(d).filter((f) => f.includes('tmp'))).toEqual([]);
    expect(loadSealingKey(null, d).equals(k)).toBe(true);
  });

  it('left empty by a kill during its first write, is made again rather than refusing every start', () => {
    const d = dir();
    writeFileSync(join(d, 'secret.key'), Buffer.alloc(0), { mode: 0o600 });
    const k = loadSealingKey(null, d);
    expect(k).toHaveLength(32);
    expect(readFileSync(join(d, 'secret.key')).equals(k)).toBe(true);
  });

  it('of any other wrong length is kept as it is (refused where it is used, never replaced)', () => {
    const d = dir();
    writeFileSync(join(d, 'secret.key'), Buffer.alloc(7, 1), { mode: 0o600 });
    expect(loadSealingKey(null, d)).toHaveLength(7);
    expect(readFileSync(join(d, 'secret.key'))).toHaveLength(7);
  });
});
