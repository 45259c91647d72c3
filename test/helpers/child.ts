import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { seedStore } from './store-template.js';

export interface ChildGateway {
  proc: ChildProcess;
  port: number;
  opsPort: number;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const ROOT = join(import.meta.dirname, '..', '..');

/**
 * Node's options that import the TypeScript sources as they are (test/helpers/ts-hooks.mjs),
 * for a child process or a worker thread that runs code under test: never a build that
 * may be stale.
 */
export const FROM_SOURCES = ['--import', join(ROOT, 'test', 'helpers', 'ts-register.mjs')];

/** The gateway's command line from its sources: `node ...GATEWAY serve`. */
export const GATEWAY = [...FROM_SOURCES, join(ROOT, 'src', 'main.ts')];

/** A source module's URL, for `import()` in a child started with FROM_SOURCES (`store/owner.ts`). */
export const sourceUrl = (path: string): string => pathToFileURL(join(ROOT, 'src', path)).href;

/** Runs the gateway from its sources (`node ...GATEWAY`) as a child process and waits until it listens. */
export async function spawnGateway(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 30_000,
  o: { freshStore?: boolean } = {},
): Promise<ChildGateway> {
  // A new data directory gets the schema copied in (store-template.ts); freshStore: migrated as a first start does.
  if (!o.freshStore && env.DATA_DIR !== undefined && env.CLICKHOUSE_URL === undefined) seedStore(env.DATA_DIR);
  const proc = spawn(process.execPath, [...GATEWAY, ...args], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout?.on('data', (c) => {
    out += c;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    proc.on('exit', (code, signal) => r({ code, signal })),
  );
  const ports = await new Promise<{ port: number; ops_port: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start in time:\n${err}`)), timeoutMs);
    proc.stderr?.on('data', (c) => {
      err += c;
      const m = /"msg":"wakegate listening","port":(\d+),"ops_port":(\d+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve({ port: Number(m[1]), ops_port: Number(m[2]) });
      }
    });
    void exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code} before listening:\n${err}`));
    });
  });
  return {
    proc,
    port: ports.port,
    opsPort: ports.ops_port,
    url: `http://127.0.0.1:${ports.port}`,
    stdout: () => out,
    stderr: () => err,
    exited,
  };
}

/** Sends `total` GETs with `concurrency` in flight; returns how many got a response. */
export async function load(
  url: (i: number) => string,
  total: number,
  concurrency: number,
  init?: RequestInit,
): Promise<number> {
  let next = 0;
  let ok = 0;
  const worker = async () => {
    for (let i = next++; i < total; i = next++) {
      const r = await fetch(url(i), init);
      await r.arrayBuffer();
      ok++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return ok;
}
