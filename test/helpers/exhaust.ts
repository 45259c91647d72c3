/** Helpers of the resource-exhaustion review: a child gateway under a descriptor limit, a tiny tmpfs, wake listing. */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GATEWAY } from './child.js';
import { seedStore } from './store-template.js';

export interface Child {
  proc: ChildProcess;
  pid: number;
  port: number;
  opsPort: number;
  url: string;
  opsUrl: string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The gateway from its sources in a child process, under `ulimit -n nofile` when given (bash, then exec node). */
export async function spawnLimited(
  args: string[],
  env: Record<string, string>,
  o: { nofile?: number; timeoutMs?: number } = {},
): Promise<Child> {
  if (env.DATA_DIR !== undefined) seedStore(env.DATA_DIR);
  const node = [process.execPath, ...GATEWAY, ...args];
  const proc =
    o.nofile === undefined
      ? spawn(node[0] as string, node.slice(1), { env: childEnv(env), stdio: ['ignore', 'ignore', 'pipe'] })
      : spawn('bash', ['-c', `ulimit -n ${o.nofile} && exec "$@"`, 'bash', ...node], {
          env: childEnv(env),
          stdio: ['ignore', 'ignore', 'pipe'],
        });
  let err = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    proc.on('exit', (code, signal) => r({ code, signal })),
  );
  const ports = await new Promise<{ port: number; ops: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start in time:\n${err}`)), o.timeoutMs ?? 30_000);
    proc.stderr?.on('data', (c) => {
      err += c;
      const m = /"msg":"wakegate listening","port":(\d+),"ops_port":(\d+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve({ port: Number(m[1]), ops: Number(m[2]) });
      }
    });
    void exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code} before listening:\n${err}`));
    });
  });
  return {
    proc,
    pid: proc.pid as number,
    port: ports.port,
    opsPort: ports.ops,
    url: `http://127.0.0.1:${ports.port}`,
    opsUrl: `http://127.0.0.1:${ports.ops}`,
    stderr: () => err,
    exited,
  };
}

const childEnv = (env: Record<string, string>) => ({
  PATH: process.env.PATH ?? '',
  PORT: '0',
  OPS_PORT: '0',
  HOST: '127.0.0.1',
  ...env,
});

/** Kills a child this test started (by its pid) and waits for it. */
export async function kill(c: Child | null): Promise<void> {
  if (c === null || c.proc.exitCode !== null || c.proc.signalCode !== null) return;
  c.proc.kill('SIGKILL');
  await c.exited;
}

/** Whether this host lets the tests mount a tmpfs (a full disk made small): root in a VM does; elsewhere those tests skip. */
export const CAN_MOUNT: boolean = (() => {
  const dir = mkdtempSync(join(tmpdir(), 'wg-can-mount-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
})();

/** A tmpfs of `size` (such as `64m`) mounted on `dir` (made if missing). */
export function mountTmpfs(dir: string, size: string): void {
  mkdirSync(dir, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]);
}

export function unmount(dir: string): void {
  try {
    execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
  } catch {
    // Not mounted.
  }
}

/** Fills the filesystem of `path` to the last byte with one file at `path`. */
export function fill(path: string): void {
  const fd = openSync(path, 'w');
  for (const size of [1 << 20, 4096, 1]) {
    const b = Buffer.alloc(size, 1);
    try {
      for (;;) writeSync(fd, b);
    } catch {
      // ENOSPC: the next smaller size.
    }
  }
  closeSync(fd);
}

/** Every wake id stored under a path template, through /v2/wakes (paged). */
export async function storedIds(url: string, admin: string, path: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const r = await fetch(`${url}/v2/wakes?path=${path}&limit=100${cursor ? `&cursor=${cursor}` : ''}`, {
      headers: { authorization: `Bearer ${admin}` },
    });
    const page = (await r.json()) as { data: { id: string }[]; next_cursor: string | null };
    for (const w of page.data) ids.push(w.id);
    cursor = page.next_cursor;
  } while (cursor);
  return ids;
}

/** A metric's value from Prometheus text (the first series matching `name` and labels as written), or null. */
export function metric(text: string, series: string): number | null {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return null;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
