import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');
/** As child.ts's FROM_SOURCES (not imported from there: child.ts imports this module). */
const FROM_SOURCES = ['--import', join(ROOT, 'test', 'helpers', 'ts-register.mjs')];

/** What the schema is made from: a change to any of these makes a new template. */
function schemaHash(): string {
  const h = createHash('sha256');
  const store = join(ROOT, 'src', 'store');
  for (const f of readdirSync(store).sort()) h.update(f).update(readFileSync(join(store, f)));
  h.update(readFileSync(join(ROOT, 'node_modules', 'chdb', 'package.json')));
  return h.digest('hex').slice(0, 16);
}

let made: string | null = null;

/**
 * A data directory whose embedded store has every migration applied, made once per
 * schema (and kept in the temporary directory across runs), in a child process: chDB
 * opens one directory per process. Several test processes may make it at once; the
 * first rename wins.
 */
function template(): string {
  if (made !== null) return made;
  const dir = join(tmpdir(), `wakegate-store-template-${schemaHash()}`);
  if (!existsSync(join(dir, 'done'))) {
    const work = mkdtempSync(`${dir}.tmp-`);
    const r = spawnSync(
      process.execPath,
      [...FROM_SOURCES, join(import.meta.dirname, 'make-store-template.ts'), work],
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    if (r.status !== 0) throw new Error(`the store template could not be made (exit ${r.status}):\n${r.stderr}`);
    writeFileSync(join(work, 'done'), '');
    try {
      renameSync(work, dir);
    } catch {
      // Another process made it first.
      rmSync(work, { recursive: true, force: true });
    }
  }
  made = dir;
  return dir;
}

/**
 * Gives a data directory that has no embedded store yet one with the schema already
 * migrated (a copy, about 1 MB): a gateway's start then finds nothing to migrate,
 * which saves it about a second and 0.3 s of CPU. A test of migrations or of a first
 * start's schema starts without it.
 */
export function seedStore(dataDir: string): void {
  const target = join(dataDir, 'clickhouse');
  if (existsSync(target)) return;
  cpSync(join(template(), 'clickhouse'), target, { recursive: true, verbatimSymlinks: true });
}
