import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

export interface ChildGateway {
  proc: ChildProcess;
  port: number;
  opsPort: number;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const MAIN = join(import.meta.dirname, '..', '..', 'dist', 'main.js');

/** Runs the built gateway (`node dist/main.js`) as a child process and waits until it listens. */
export async function spawnGateway(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 30_000,
): Promise<ChildGateway> {
  const proc = spawn(process.execPath, [MAIN, ...args], {
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
