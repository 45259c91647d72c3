import { execFile } from 'node:child_process';
import { GATEWAY } from './child.js';

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `wakegate ARGS` from the sources until it exits; asynchronous, so the test's own servers answer meanwhile. */
export function wakegate(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<Ran> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [...GATEWAY, ...args],
      {
        env: { PATH: process.env.PATH ?? '', PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', ...env },
        timeout: timeoutMs,
      },
      (err, stdout, stderr) =>
        resolve({
          code: err ? ((err as { code?: number }).code ?? 1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        }),
    ),
  );
}
