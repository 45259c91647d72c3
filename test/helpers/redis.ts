import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';

export interface TestRedis {
  url: string;
  port: number;
  /** Stops the server (SIGKILL: an outage, not a shutdown). */
  stop: () => Promise<void>;
  /** Starts it again on the same port, empty. */
  start: () => Promise<void>;
  /** Runs one command through redis-cli; its output. */
  cli: (...args: string[]) => Promise<string>;
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });

/** Debian's redis-server (scripts/ensure-tools.sh installs it) on a loopback port, nothing saved to disk. */
export async function startRedis(): Promise<TestRedis> {
  const port = await freePort();
  let proc: ChildProcess | null = null;
  const start = async () => {
    const p = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        // DEBUG SLEEP makes a slow Redis, from loopback only.
        '--enable-debug-command',
        'local',
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    proc = p;
    let out = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${out}`)), 10_000);
      p.stdout?.on('data', (c) => {
        out += c;
        if (out.includes('Ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      });
      p.on('exit', () => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited:\n${out}`));
      });
    });
  };
  const stop = async () => {
    const p = proc;
    proc = null;
    if (!p || p.exitCode !== null) return;
    const gone = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await gone;
  };
  const cli = (...args: string[]) =>
    new Promise<string>((resolve) => {
      const c = spawn('redis-cli', ['-p', String(port), ...args]);
      let out = '';
      c.stdout.on('data', (d) => {
        out += d;
      });
      c.on('exit', () => resolve(out.trim()));
    });
  await start();
  return { url: `redis://127.0.0.1:${port}/0`, port, stop, start, cli };
}
