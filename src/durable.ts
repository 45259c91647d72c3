import { close, closeSync, fsync, fsyncSync, open, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { open as openFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * Files that must survive a power loss. A file's own fsync makes its bytes durable,
 * not its name: a file created or renamed is durable only once its directory is
 * synced too (POSIX; ext4 and XFS usually do it with the file's journal commit, other
 * filesystems do not).
 */

/** Syncs a directory, so names created or renamed in it so far survive a power loss. */
export function syncDir(dir: string): void {
  let fd: number | null = null;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // A filesystem that cannot sync a directory (some network ones) has nothing more to offer.
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

/** syncDir off the event loop; `done` hears of the end (an error is not one: see syncDir). */
export function syncDirLater(dir: string, done: () => void = () => {}): void {
  open(dir, 'r', (err, fd) => {
    if (err) return done();
    fsync(fd, () => close(fd, () => done()));
  });
}

/**
 * Replaces `path` with `bytes` so that a power loss leaves either the old file or the
 * new one whole: a temporary file (0600) written and synced, renamed over, the
 * directory synced.
 */
export function replaceFile(path: string, bytes: Buffer): void {
  const tmp = `${path}.tmp`;
  rmSync(tmp, { force: true });
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    try {
      for (let off = 0; off < bytes.length; ) off += writeSync(fd, bytes, off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    // A full disk, a failed sync or rename: the old file stands, and no temporary one is left.
    rmSync(tmp, { force: true });
    throw e;
  }
  syncDir(dirname(path));
}

/** replaceFile off the event loop: the same steps, each awaited. */
export async function replaceFileLater(path: string, bytes: Buffer): Promise<void> {
  const tmp = `${path}.tmp`;
  await rm(tmp, { force: true });
  const fh = await openFile(tmp, 'wx', 0o600);
  try {
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (e) {
    // The old file stands, and no temporary one is left.
    await rm(tmp, { force: true });
    throw e;
  }
  // The new name, not only its bytes, survives a power loss.
  await new Promise<void>((r) => syncDirLater(dirname(path), r));
}
