import { chmodSync, mkdirSync } from 'node:fs';

/**
 * Makes `dir` (and its parents, where it creates them) private to the gateway's
 * user: 0700. Wakes, keys' hashes and sealed secrets live below it; other local
 * users must not be able to read them.
 */
export function privateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/**
 * Files the storage engine creates inside the process get mode 0600 and folders
 * 0700: the embedded engine takes the process umask, and has no option of its own.
 */
export function privateUmask(): void {
  process.umask(0o077);
}
