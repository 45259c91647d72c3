import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'chdb-http.mjs');

export interface HttpStorage {
  url: string;
  proc: ChildProcess;
  stop: () => Promise<void>;
}

/**
 * Storage behind ClickHouse's HTTP interface in a process of its own
 * (scripts/chdb-http.mjs over chDB), for the gateway's CLICKHOUSE_URL mode.
 */
export async function startHttpStorage(timeoutMs = 30_000): Promise<HttpStorage> {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-http-storage-'));
  const proc = spawn(process.execPath, [SCRIPT], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', DATA: join(dir, 'data'), EXIT_WITH_PARENT: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stderr?.on('data', (c) => {
    err += c;
  });
  let stopping = false;
  const exited = new Promise<void>((r) =>
    proc.on('exit', (code, signal) => {
      // Dying mid-test shows up as refused connections: say why, with what it printed.
      if (!stopping) console.error(`storage over HTTP exited (code ${code}, signal ${signal}):\n${err}`);
      r();
    }),
  );
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`storage over HTTP did not start:\n${err}`)), timeoutMs);
    proc.stdout?.on('data', (c) => {
      out += c;
      const m = /listening (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`storage over HTTP exited before listening:\n${err}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    proc,
    stop: async () => {
      stopping = true;
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
