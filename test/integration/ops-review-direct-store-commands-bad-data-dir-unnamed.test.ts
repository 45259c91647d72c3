// Regression tests from a review of the operator's second day (2026-11-28).
// `migrate` and `keys create --offline` on a DATA_DIR that cannot be used print a bare "ENOTDIR: not a directory, mkdir ..." naming no setting, where serve names DATA_DIR (storage.data_dir)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wakegate } from '../helpers/cli-run.js';

/**
 * src/run.ts openDirect says the commands that open the store directly speak "as serve
 * says it". serve, on a DATA_DIR that cannot be held, says
 * `wakegate: DATA_DIR <dir> cannot be held (ENOTDIR): check storage.data_dir`
 * (src/startup.ts holdDataDir); migrate and keys create --offline rethrow lockDataDir's
 * raw error instead: `wakegate: ENOTDIR: not a directory, mkdir '<dir>'`. The recovery
 * command of docs/operations.md ("When no key can reach the API ... run wakegate keys
 * create --offline") is the one an operator runs under stress.
 */
describe('a DATA_DIR that cannot be used, to the commands that open the store directly', () => {
  let dir: string;
  let bad: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-baddir-'));
    // A path through a regular file: a typo'd mount point, a file where the directory should be.
    writeFileSync(join(dir, 'file'), 'x');
    bad = join(dir, 'file', 'data');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('serve names DATA_DIR and storage.data_dir (what the others should say too)', async () => {
    const r = await wakegate(['serve'], { DATA_DIR: bad, ORIGIN_URL: 'http://127.0.0.1:9' });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(/DATA_DIR .* \(storage\.data_dir\)|storage\.data_dir/);
  });

  it.each([
    ['migrate', ['migrate']],
    [
      'keys create --offline',
      ['keys', 'create', '--offline', '--label', 'admin', '--environment', 'production', '--scopes', 'keys:read'],
    ],
  ])('%s: exit 1, one line naming DATA_DIR / storage.data_dir', async (_name, args) => {
    const r = await wakegate(args, { DATA_DIR: bad });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
    expect(r.stderr.trim()).toMatch(/storage\.data_dir/);
  });
});
