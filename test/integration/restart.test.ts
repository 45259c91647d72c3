import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, GATEWAY, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where the restarted gateways serve with two edge threads.

/** Runs the gateway (from its sources) until it exits; its output. */
function run(args: string[], env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [...GATEWAY, ...args],
      { env: { PATH: process.env.PATH ?? '', PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', ...env }, timeout: 30_000 },
      (err, _stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr: String(stderr) }),
    ),
  );
}

/** The state letter of a process in /proc (R, S, Z...), or null once it is gone. */
function procState(pid: number): string | null {
  try {
    return /\) (\w) /.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1] ?? null;
  } catch {
    return null;
  }
}

/**
 * A gateway whose parent never reaps it: `sh` starts it in the background and then
 * becomes `sleep`, so once killed it stays a zombie, its pid still "alive" to kill(pid, 0).
 */
async function unreapedGateway(args: string[], env: Record<string, string>) {
  const parent = spawn('sh', ['-c', '"$0" "$@" & echo $!; exec sleep 600', process.execPath, ...GATEWAY, ...args], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  parent.stdout.on('data', (c) => {
    out += c;
  });
  parent.stderr.on('data', (c) => {
    err += c;
  });
  await until(async () => /"msg":"wakegate listening"/.test(err), 30_000, `the gateway to listen:\n${err}`);
  return { parent, pid: Number(out.split('\n')[0]) };
}

const stop = async (g: ChildGateway) => {
  g.proc.kill('SIGTERM');
  return g.exited;
};

/** Issue #34, item 1: the data directory is held by a lock the kernel releases, never by a guess about a pid. */
describe('restart after a crash, on the same DATA_DIR (child gateways)', () => {
  let dir: string;
  let origin: TestServer;
  const threadCounts = hasReusePort() ? [1, 2] : [1];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-restart-'));
    origin = await startServer((_req, res) => res.end('ok'));
    for (const n of [1, 2]) writeFileSync(join(dir, `threads${n}.yaml`), `server: { threads: ${n} }\n`);
  });
  afterAll(async () => {
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each(threadCounts)(
    'a gateway SIGKILLed and left a zombie (%i thread(s)) is restarted at once',
    async (n) => {
      const env = { DATA_DIR: join(dir, `zombie${n}`), ORIGIN_URL: origin.url };
      const args = ['serve', '--config', join(dir, `threads${n}.yaml`)];
      const first = await unreapedGateway(args, env);
      try {
        process.kill(first.pid, 'SIGKILL');
        await until(async () => procState(first.pid) === 'Z', 10_000, 'the killed gateway to be a zombie');
        // kill(pid, 0) still answers for a zombie: that is what refused the start before.
        expect(() => process.kill(first.pid, 0)).not.toThrow();
        const g = await spawnGateway(args, env);
        try {
          expect(g.stderr()).toContain(`"threads":${n}`);
          expect((await fetch(`${g.url}/after/zombie`)).status).toBe(200);
        } finally {
          await stop(g);
        }
      } finally {
        parent(first.parent);
      }
    },
    90_000,
  );

  it.each(threadCounts)(
    'a gateway SIGKILLed (%i thread(s)) is started again without waiting for its exit',
    async (n) => {
      const env = { DATA_DIR: join(dir, `kill${n}`), ORIGIN_URL: origin.url };
      const args = ['serve', '--config', join(dir, `threads${n}.yaml`)];
      const g1 = await spawnGateway(args, env);
      g1.proc.kill('SIGKILL');
      const g2 = await spawnGateway(args, env);
      try {
        expect((await g1.exited).signal).toBe('SIGKILL');
        expect(g2.stderr()).toContain(`"threads":${n}`);
        expect((await fetch(`${g2.url}/after/kill`)).status).toBe(200);
      } finally {
        await stop(g2);
      }
    },
    90_000,
  );

  it('a gateway.pid naming a live unrelated process (this test runner, pid 1) blocks nothing', async () => {
    for (const pid of [process.pid, 1]) {
      const data = join(dir, `pidfile${pid}`);
      mkdirSync(data, { recursive: true });
      writeFileSync(join(data, 'gateway.pid'), `${pid}\n`);
      const g = await spawnGateway(['serve'], { DATA_DIR: data, ORIGIN_URL: origin.url });
      expect((await stop(g)).code).toBe(0);
    }
  }, 90_000);

  it('a second live gateway, migrate and keys create --offline are refused in one line naming the pid', async () => {
    const env = { DATA_DIR: join(dir, 'live'), ORIGIN_URL: origin.url };
    const g = await spawnGateway(['serve'], env);
    try {
      const pid = g.proc.pid as number;
      const second = await run(['serve'], env);
      expect(second.code).toBe(1);
      expect(second.stderr.trim().split('\n'), second.stderr).toEqual([
        expect.stringMatching(
          new RegExp(
            `^wakegate: DATA_DIR .* is in use by the gateway with pid ${pid}: .*own DATA_DIR \\(storage\\.data_dir\\)$`,
          ),
        ),
      ]);
      for (const args of [
        ['migrate'],
        ['keys', 'create', '--offline', '--label', 'x', '--environment', 'production', '--scopes', 'wakes:read'],
      ]) {
        const r = await run(args, env);
        expect(r.code).toBe(1);
        expect(r.stderr.trim().split('\n'), r.stderr).toEqual([
          expect.stringMatching(new RegExp(`held by a running gateway \\(pid ${pid}\\); `)),
        ]);
      }
      // The refused ones took nothing: the gateway still serves, and stops cleanly.
      expect((await fetch(`${g.url}/still`)).status).toBe(200);
    } finally {
      expect((await stop(g)).code).toBe(0);
    }
    // Once it stopped, the directory is free again.
    const m = await run(['migrate'], env);
    expect(m.code, m.stderr).toBe(0);
  }, 90_000);
});

/** Ends the never-reaping parent; its zombie child is then reaped by init. */
function parent(p: ReturnType<typeof spawn>): void {
  p.kill('SIGKILL');
}
