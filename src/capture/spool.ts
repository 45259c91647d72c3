import { readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { privateDir } from '../store/private-dir.js';

export interface SpoolEntry<T> {
  /** Name of the file holding it; entries sort by name in the order they were written. */
  name: string;
  token: string;
  rows: T[];
}

/**
 * An append-only, crash-safe spool of batches on disk: one file per batch, written
 * to a temporary name and renamed, so a crash leaves either the whole batch or
 * nothing. Batches are read back oldest first. A disk budget bounds it.
 */
export class Spool<T> {
  private seq = 0;
  private bytes = 0;
  private files = 0;

  constructor(
    private readonly dir: string,
    private readonly maxBytes: number,
  ) {
    privateDir(dir);
    for (const f of readdirSync(dir)) {
      if (f.endsWith('.tmp')) {
        rmSync(join(dir, f), { force: true });
        continue;
      }
      if (!f.endsWith('.json')) continue;
      this.bytes += statSync(join(dir, f)).size;
      this.files++;
      const n = Number.parseInt(f.slice(0, 16), 10);
      if (Number.isFinite(n) && n >= this.seq) this.seq = n + 1;
    }
  }

  get size(): number {
    return this.bytes;
  }

  get length(): number {
    return this.files;
  }

  /** Writes a batch; returns false (writing nothing) when the disk budget would be exceeded. */
  append(token: string, rows: readonly T[]): boolean {
    const body = JSON.stringify({ token, rows });
    const len = Buffer.byteLength(body);
    if (this.bytes + len > this.maxBytes) return false;
    const name = `${String(this.seq++).padStart(16, '0')}.json`;
    const tmp = join(this.dir, `${name}.tmp`);
    writeFileSync(tmp, body, { mode: 0o600 });
    renameSync(tmp, join(this.dir, name));
    this.bytes += len;
    this.files++;
    return true;
  }

  /** The oldest batch, or null when empty. */
  peek(): SpoolEntry<T> | null {
    const names = readdirSync(this.dir)
      .filter((f) => f.endsWith('.json'))
      .sort();
    const name = names[0];
    if (!name) return null;
    const parsed = JSON.parse(readFileSync(join(this.dir, name), 'utf8')) as { token: string; rows: T[] };
    return { name, token: parsed.token, rows: parsed.rows };
  }

  remove(entry: SpoolEntry<T>): void {
    const p = join(this.dir, entry.name);
    const size = statSync(p).size;
    rmSync(p, { force: true });
    this.bytes -= size;
    this.files--;
  }
}
