import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirHeld, holder, lockDataDir } from '../../src/store/owner.js';
import { holdSocketFile } from '../../src/store/owner-path.js';
import { FROM_SOURCES, sourceUrl } from '../helpers/child.js';

/**
 * The data directory lock seen from another network namespace (two containers sharing
 * the DATA_DIR volume), and starters racing on the socket file a SIGKILL left behind.
 */
const owner = sourceUrl('store/owner.ts');

/** Can this run make network namespaces (root with unshare)? Else why not. */
const unshareSkip = (() => {
  if (process.platform !== 'linux') return 'network namespaces are Linux only';
  const r = spawnSync('unshare', ['-n', 'true'], { stdio: 'ignore' });
  if (r.error) return `unshare is not available (${r.error.message})`;
  return r.status === 0 ? null : 'unshare -n is not permitted here (needs root or user namespaces)';
})();
if (unshareSkip) console.warn(`skipped: ${unshareSkip}`);

/** A process taking the lock of `dir` (in a network namespace of its own when `netns`); says held or refused. */
function starter(dir: string, netns: boolean): { proc: ChildProcess; said: Promise<string> } {
  const node = [
    process.execPath,
    ...FROM_SOURCES,
    '--input-type=module',
    '-e',
    `const m = await import(${JSON.stringify(owner)}); m.lockDataDir(${JSON.stringify(dir)}).then(() => console.log('held'), (e) => console.log(e instanceof m.DirHeld ? 'refused ' + e.pid : e.message)); setInterval(() => {}, 1000);`,
  ];
  const proc = netns
    ? spawn('unshare', ['-n', ...node], { stdio: ['ignore', 'pipe', 'inherit'] })
    : spawn(node[0] as string, node.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  const said = new Promise<string>((r) => proc.stdout?.once('data', (c) => r(String(c).trim())));
  return { proc, said };
}

const killed = (p: ChildProcess) =>
  new Promise<void>((r) => {
    if (p.exitCode !== null || p.signalCode !== null) return r();
    p.once('exit', () => r());
    p.kill('SIGKILL');
  });

/** Leaves `dir`/gateway.sock as a SIGKILL leaves it: a socket file nobody answers on. */
async function staleSocketFile(dir: string): Promise<void> {
  const path = join(dir, 'gateway.sock');
  const child = spawn(
    process.execPath,
    ['-e', `require('net').createServer().listen(${JSON.stringify(path)}, () => console.log('up'))`],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise((r) => child.stdout.once('data', r));
  await killed(child);
  expect(existsSync(path)).toBe(true);
}

describe('the data directory lock across network namespaces and stale socket files', () => {
  let root: string;
  let n = 0;
  const fresh = () => {
    const d = join(root, `d${n++}`);
    mkdirSync(d, { mode: 0o700 });
    return d;
  };
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'wakegate-ns-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it.skipIf(unshareSkip !== null)(
    'a gateway in another network namespace is refused while this one holds the directory, and starts once it is gone',
    async () => {
      const dir = fresh();
      const lock = await lockDataDir(dir);
      const other = starter(dir, true);
      try {
        expect(await other.said).toBe(`refused ${process.pid}`);
      } finally {
        await killed(other.proc);
      }
      await lock.release();
      const again = starter(dir, true);
      try {
        expect(await again.said).toBe('held');
        // And this namespace is refused while the other holds it.
        const err = await lockDataDir(dir).then(
          (l) => l.release().then(() => null),
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(DirHeld);
      } finally {
        await killed(again.proc);
      }
    },
    60_000,
  );

  it.skipIf(unshareSkip !== null)(
    'starters in separate network namespaces racing on a stale socket file: exactly one holds it',
    async () => {
      for (let round = 0; round < 3; round++) {
        const dir = fresh();
        await staleSocketFile(dir);
        const racers = Array.from({ length: 4 }, () => starter(dir, true));
        try {
          const said = await Promise.all(racers.map((r) => r.said));
          expect(said.filter((s) => s === 'held')).toHaveLength(1);
          expect(said.filter((s) => s.startsWith('refused'))).toHaveLength(3);
        } finally {
          await Promise.all(racers.map((r) => killed(r.proc)));
        }
      }
    },
    90_000,
  );

  it('a SIGKILLed holder leaves a socket file; the next start (a separate process) takes it at once', async () => {
    const dir = fresh();
    const first = starter(dir, false);
    expect(await first.said).toBe('held');
    await killed(first.proc);
    expect(existsSync(join(dir, 'gateway.sock'))).toBe(true);
    const next = starter(dir, false);
    try {
      expect(await next.said).toBe('held');
    } finally {
      await killed(next.proc);
    }
  }, 30_000);

  it('property: any number of starters racing on a stale or live socket file, whatever else lies there: at most one wins, exactly one when it was stale', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 6 }),
        fc.constantFrom('none', 'stale-socket', 'regular-file', 'live'),
        fc.array(fc.constantFrom('gateway.sock.1.aaaaaaaaaaaa', 'gateway.sock.x', 'gateway.lock-id'), {
          maxLength: 3,
        }),
        async (count, before, litter) => {
          const dir = realpathSync(fresh());
          for (const name of litter) writeFileSync(join(dir, name), 'x');
          let live: net.Server | null = null;
          if (before === 'regular-file') writeFileSync(join(dir, 'gateway.sock'), '12345\n');
          if (before === 'stale-socket') await staleSocketFile(dir);
          if (before === 'live') {
            live = net.createServer((s) => s.end('4242\n'));
            await new Promise<void>((r) => live?.listen(join(dir, 'gateway.sock'), r));
          }
          const results = await Promise.allSettled(
            Array.from({ length: count }, () =>
              holdSocketFile({
                real: dir,
                server: () => net.createServer((s) => s.end(`${process.pid}\n`)),
                holder,
                held: (pid) => new DirHeld(dir, pid),
              }),
            ),
          );
          const won = results.filter((r) => r.status === 'fulfilled');
          for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(DirHeld);
          if (live) {
            expect(won).toHaveLength(0);
            expect(await holder(join(dir, 'gateway.sock'))).toBe(4242);
            await new Promise<void>((r) => live?.close(() => r()));
          } else {
            expect(won).toHaveLength(1);
            expect(await holder(join(dir, 'gateway.sock'))).toBe(process.pid);
          }
          for (const w of won) await w.value.close();
          // Nothing of the starters is left behind: only what was there before.
          const left = readdirSync(dir).filter(
            (f) => f.startsWith('gateway.sock.') && !(litter as string[]).includes(f),
          );
          expect(left).toEqual([]);
        },
      ),
      { numRuns: 25 },
    );
  }, 120_000);

  it('a data directory path too long for a socket address is still locked (Linux)', async () => {
    if (process.platform !== 'linux') return;
    let dir = fresh();
    while (dir.length < 140) dir = join(dir, 'a-long-directory-name-for-the-lock');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const lock = await lockDataDir(dir);
    const other = starter(dir, false);
    try {
      expect(await other.said).toBe(`refused ${process.pid}`);
    } finally {
      await killed(other.proc);
    }
    await lock.release();
    expect(existsSync(join(dir, 'gateway.sock'))).toBe(false);
  }, 30_000);
});
