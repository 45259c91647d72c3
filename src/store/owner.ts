import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * `DATA_DIR/gateway.pid`: the process serving from this data directory. The
 * embedded engine binds its directory to one process; commands that open the
 * store directly (migrate, keys create --offline) look here first, so they can say
 * in one line that a gateway holds it instead of failing inside the engine.
 */
const file = (dataDir: string) => join(dataDir, 'gateway.pid');

export function claimOwner(dataDir: string): void {
  writeFileSync(file(dataDir), `${process.pid}\n`, { mode: 0o600 });
}

export function releaseOwner(dataDir: string): void {
  try {
    if (readFileSync(file(dataDir), 'utf8').trim() === String(process.pid)) rmSync(file(dataDir), { force: true });
  } catch {
    // Nothing claimed.
  }
}

/** The pid of a live process that claimed the directory, or null (none, or it died: a stale file). */
export function heldBy(dataDir: string): number | null {
  let pid: number;
  try {
    pid = Number(readFileSync(file(dataDir), 'utf8').trim());
  } catch {
    return null;
  }
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return null;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM' ? pid : null;
  }
}
