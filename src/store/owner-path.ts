import { randomBytes } from 'node:crypto';
import { closeSync, linkSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import type net from 'node:net';
import { join } from 'node:path';

/**
 * The data directory's lock as a socket file, `gateway.sock`, in the directory: unlike
 * an abstract socket it does not belong to a network namespace, so two containers
 * sharing the volume see one lock. The kernel frees the socket when its process dies
 * (even SIGKILL), but the file stays: a file nobody answers on is stale.
 *
 * Taking it never replaces a file: the socket is bound under a name of its own, then
 * hard-linked to `gateway.sock` (link fails when the name exists). A file there is
 * probed; only one nobody answers on is moved aside (only one starter can move a
 * given file), and removed when what was moved is the very file probed (inode and
 * birth time); otherwise it was another starter's live file, and it goes back. Two
 * starters racing on a stale file cannot both win. (Three or more, in separate
 * network namespaces, within the microseconds between one's probe and its move,
 * could: in one namespace the abstract socket orders them first.)
 */
export interface PathLock {
  close(): Promise<void>;
}

/** Paths a socket can be bound or connected at (sun_path: 108 bytes with its NUL, 104 on some systems). */
const SUN_PATH_MAX = 103;

/** How many stale files one start removes before giving up (each needs a racer to recreate it). */
const ATTEMPTS = 4;

export type HolderProbe = (path: string) => Promise<number | null | undefined>;

/**
 * Takes `real`/gateway.sock (`real`: the directory's real path). Resolves to the lock,
 * or rejects with `held(pid)` when a live process holds it (pid null when unknown).
 */
export async function holdSocketFile(o: {
  real: string;
  server: () => net.Server;
  holder: HolderProbe;
  held: (pid: number | null) => Error;
}): Promise<PathLock> {
  const { real } = o;
  const target = join(real, 'gateway.sock');
  const unique = () => `gateway.sock.${process.pid}.${randomBytes(6).toString('hex')}`;
  const mine = unique();
  const at = socketDir(real, mine);
  const server = o.server();
  try {
    await listenExclusive(server, join(at.dir, mine));
    const ino = statSync(join(real, mine)).ino;
    try {
      for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
        try {
          linkSync(join(real, mine), target);
          return {
            close: async () => {
              try {
                if (statSync(target).ino === ino) rmSync(target, { force: true });
              } catch {}
              await new Promise<void>((r) => server.close(() => r()));
            },
          };
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        }
        // Probed under its own name first: a live holder's file is never moved.
        const seen = identity(target);
        if (seen === null) continue;
        const pid = await o.holder(join(at.dir, 'gateway.sock'));
        if (pid !== undefined) throw o.held(pid);
        const aside = join(real, unique());
        try {
          renameSync(target, aside);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
          throw e;
        }
        if (identity(aside) !== seen) {
          // Another starter's live file took the stale one's place after the probe: it goes back.
          try {
            linkSync(aside, target);
          } catch {}
          rmSync(aside, { force: true });
          throw o.held(null);
        }
        rmSync(aside, { force: true, recursive: true });
      }
      throw o.held(null);
    } finally {
      rmSync(join(real, mine), { force: true });
    }
  } catch (e) {
    server.close();
    throw e;
  } finally {
    at.close();
  }
}

/**
 * Where sockets in `real` are bound and connected: the directory itself when the path
 * fits in sun_path; else, on Linux, the directory through an open descriptor
 * (/proc/self/fd/N), whatever its length.
 */
function socketDir(real: string, longestName: string): { dir: string; close: () => void } {
  if (Buffer.byteLength(join(real, longestName)) <= SUN_PATH_MAX) return { dir: real, close: () => {} };
  if (process.platform !== 'linux') {
    throw new Error(`the data directory's path is too long for its lock socket (${real}); use a shorter DATA_DIR`);
  }
  const fd = openSync(real, 'r');
  return { dir: `/proc/self/fd/${fd}`, close: () => closeSync(fd) };
}

/** A file's identity (inode and birth time: an inode number alone can be reused), or null when it is gone. */
function identity(path: string): string | null {
  try {
    const st = statSync(path, { bigint: true });
    return `${st.dev}:${st.ino}:${st.birthtimeNs}`;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

/** Listens on a Unix socket path (or abstract name) exclusively; rejects when it is taken. */
export function listenExclusive(server: net.Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ path, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
