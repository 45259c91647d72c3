import { createHash, randomBytes } from 'node:crypto';
import { linkSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { privateDir } from '../private-dir.js';
import { holdSocketFile, listenExclusive, type PathLock } from './owner-path.js';

/**
 * The data directory is held by a lock the kernel releases when the process dies,
 * never by a pid file that a guess about a pid decides: a restart right after a
 * SIGKILL or an OOM kill starts at once, and a file left by a reboot or naming a
 * reused pid blocks nothing. On Linux the lock is an abstract Unix socket named after
 * the directory (no socket file: nothing is left behind to block) and, because an
 * abstract socket belongs to one network namespace (two containers sharing the volume
 * would each get one), also a socket file in the directory (owner-path.ts), which a
 * connection proves live; elsewhere the socket file alone. The holder answers a
 * connection with its pid: only information for the message that names it.
 */
export interface DirLock {
  release(): Promise<void>;
}

/** The directory is held by a live process; its pid when it said it. */
export class DirHeld extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number | null,
  ) {
    super(`${dataDir} is held by ${pid === null ? 'another process' : `the process with pid ${pid}`}`);
  }
}

/**
 * Where the lock of `dataDir` listens (the directory must exist: its real path names
 * it). An abstract socket has no permissions, so its name also hashes a random id kept
 * in the directory (0700): another user of the machine cannot know the name, and so
 * cannot take it first to keep the gateway from starting.
 */
export function lockAddress(dataDir: string, platform: NodeJS.Platform = process.platform): string {
  const real = realpathSync(dataDir);
  if (platform !== 'linux') return join(real, 'gateway.sock');
  return `\0wakegate:${createHash('sha256').update(real).update('\0').update(lockId(real)).digest('hex')}`;
}

/** The directory's lock id: made once, atomically (the first of two starts racing wins); any content is an id. */
function lockId(real: string): Buffer {
  const file = join(real, 'gateway.lock-id');
  try {
    return readFileSync(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}`;
  writeFileSync(tmp, `${randomBytes(16).toString('hex')}\n`, { mode: 0o600 });
  try {
    linkSync(tmp, file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  } finally {
    rmSync(tmp, { force: true });
  }
  return readFileSync(file);
}

/**
 * The directories this process holds, by lock address. Gateways in one process (tests
 * run several) share its one embedded engine, and so the lock: released by the last.
 */
const held = new Map<string, { taken: Promise<PathLock>; users: number }>();

/** Takes `dataDir` (made, 0700, if missing) for this process; throws DirHeld when another live process holds it. */
export async function lockDataDir(dataDir: string, platform: NodeJS.Platform = process.platform): Promise<DirLock> {
  privateDir(dataDir);
  const address = lockAddress(dataDir, platform);
  let entry = held.get(address);
  if (!entry) {
    const fresh = { taken: takeAll(dataDir, address), users: 0 };
    fresh.taken.catch(() => {
      if (held.get(address) === fresh) held.delete(address);
    });
    held.set(address, fresh);
    entry = fresh;
  }
  const mine = entry;
  mine.users++;
  let lock: PathLock;
  try {
    lock = await mine.taken;
  } catch (e) {
    mine.users--;
    throw e;
  }
  let released = false;
  return {
    release: async () => {
      if (released || --mine.users > 0) {
        released = true;
        return;
      }
      released = true;
      held.delete(address);
      await lock.close();
    },
  };
}

/**
 * On Linux the abstract socket (per network namespace, nothing left behind) and the
 * socket file in the directory (seen from every namespace sharing the volume); the
 * socket file alone elsewhere.
 */
async function takeAll(dataDir: string, address: string): Promise<PathLock> {
  const real = realpathSync(dataDir);
  const file = () => holdSocketFile({ real, server: pidServer, holder, held: (pid) => new DirHeld(dataDir, pid) });
  if (!address.startsWith('\0')) return file();
  const abstract = await take(dataDir, address);
  const closeAbstract = () => new Promise<void>((r) => abstract.close(() => r()));
  try {
    const inDir = await file();
    return {
      close: async () => {
        await inDir.close();
        await closeAbstract();
      },
    };
  } catch (e) {
    await closeAbstract();
    throw e;
  }
}

/** A lock's server: answers a connection with this process's pid. */
function pidServer(): net.Server {
  const server = net.createServer((s) => {
    s.unref();
    s.on('error', () => {});
    s.end(`${process.pid}\n`);
  });
  server.unref();
  return server;
}

/** Binds the lock at `address`, or says who holds it. */
async function take(dataDir: string, address: string): Promise<net.Server> {
  const abstract = address.startsWith('\0');
  // A socket file can outlive its process: one nobody answers on is removed once and the bind tried again.
  for (let attempt = 0; ; attempt++) {
    const server = pidServer();
    try {
      await listenExclusive(server, address);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
      const pid = await holder(address);
      if (pid !== undefined) throw new DirHeld(dataDir, pid);
      if (attempt > 0) throw new DirHeld(dataDir, null);
      if (!abstract) rmSync(address, { force: true });
      continue;
    }
    server.unref();
    server.on('error', () => {});
    return server;
  }
}

/**
 * Who answers at `address`: its pid, null when it is live but said no pid (in time),
 * undefined when nothing listens there (a socket file left behind).
 */
export function holder(address: string, timeoutMs = 2000): Promise<number | null | undefined> {
  return new Promise((resolve) => {
    let said = '';
    const s = net.connect({ path: address });
    const done = (v: number | null | undefined) => {
      clearTimeout(timer);
      s.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(null), timeoutMs);
    s.setEncoding('utf8');
    s.on('data', (c: string) => {
      said = (said + c).slice(0, 32);
    });
    s.on('end', () => {
      const pid = Number(said.trim());
      done(Number.isSafeInteger(pid) && pid > 0 ? pid : null);
    });
    s.on('error', (e: NodeJS.ErrnoException) =>
      done(e.code === 'ECONNREFUSED' || e.code === 'ENOENT' ? undefined : null),
    );
  });
}
