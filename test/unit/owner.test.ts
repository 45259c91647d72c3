import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirHeld, lockAddress, lockDataDir } from '../../src/store/owner.js';
import { FROM_SOURCES, sourceUrl } from '../helpers/child.js';

/** Issue #34, item 1: whatever a dead gateway or anything else left in DATA_DIR, only a live holder blocks. */
describe('the data directory lock', () => {
  let root: string;
  let n = 0;
  const fresh = () => join(root, `d${n++}`);
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'wakegate-owner-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  // On Linux the lock is an abstract socket; elsewhere a socket file in the directory (tried here too).
  const platforms: NodeJS.Platform[] = ['linux', 'darwin'];
  const names = ['gateway.pid', 'gateway.sock', 'gateway.lock', 'gateway.lock-id', 'LOCK'];

  it.each(platforms)('a stale artifact of any content never blocks a start (%s)', async (platform) => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom(...names), fc.uint8Array({ maxLength: 64 })), { maxLength: 4 }),
        fc.constantFrom(String(process.pid), '1', String(process.ppid), '0', '-1', '99999999', ''),
        async (files, pid) => {
          const dir = fresh();
          mkdirSync(dir);
          writeFileSync(join(dir, 'gateway.pid'), `${pid}\n`);
          for (const [name, bytes] of files) writeFileSync(join(dir, name), bytes);
          const lock = await lockDataDir(dir, platform);
          await lock.release();
        },
      ),
      { numRuns: 60 },
    );
  });

  it.each(platforms)(
    'every spelling of one directory is one lock, held until its last holder in the process lets go (%s)',
    async (platform) => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom('same', 'slash', 'dot', 'up', 'link'), async (spelling) => {
          const dir = fresh();
          mkdirSync(dir);
          symlinkSync(dir, `${dir}.link`);
          const alias = {
            same: dir,
            slash: `${dir}/`,
            dot: `${dir}/.`,
            up: join(dir, '..', dir.split('/').pop() as string),
            link: `${dir}.link`,
          }[spelling];
          expect(lockAddress(alias, platform)).toBe(lockAddress(dir, platform));
          const other = fresh();
          mkdirSync(other);
          expect(lockAddress(other, platform)).not.toBe(lockAddress(dir, platform));
          // In one process the lock is shared (gateways in one test process share the engine),
          // and it is held, answering this pid, until the last of them lets it go.
          const a = await lockDataDir(dir, platform);
          const b = await lockDataDir(alias, platform);
          await a.release();
          await a.release();
          expect(await answer(lockAddress(dir, platform))).toBe(String(process.pid));
          await b.release();
          expect(await answer(lockAddress(dir, platform))).toBe(null);
          // Released: the directory is free again.
          await (await lockDataDir(alias, platform)).release();
        }),
        { numRuns: 20 },
      );
    },
  );

  it("the abstract name is not the path's alone: another user who knows DATA_DIR cannot take it first", async () => {
    const dir = fresh();
    mkdirSync(dir);
    const squatter = net.createServer();
    const naive = `\0wakegate:${createHash('sha256').update(realpathSync(dir)).digest('hex')}`;
    await new Promise<void>((r) => squatter.listen({ path: naive }, r));
    try {
      const lock = await lockDataDir(dir, 'linux');
      await lock.release();
      // The id that makes the name unknowable is readable by the gateway's user only.
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      expect(statSync(join(dir, 'gateway.lock-id')).mode & 0o777).toBe(0o600);
    } finally {
      squatter.close();
    }
  });

  it('starts racing on a new directory from several processes: exactly one holds it', async () => {
    const dir = fresh();
    const owner = sourceUrl('store/owner.ts');
    const racers = Array.from({ length: 4 }, () =>
      spawn(
        process.execPath,
        [
          ...FROM_SOURCES,
          '--input-type=module',
          '-e',
          `const m = await import(${JSON.stringify(owner)}); m.lockDataDir(${JSON.stringify(dir)}).then(() => console.log('held'), (e) => console.log(e instanceof m.DirHeld ? 'refused' : e.message)); setInterval(() => {}, 1000);`,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      ),
    );
    try {
      const said = await Promise.all(
        racers.map((p) => new Promise<string>((r) => p.stdout.once('data', (c) => r(String(c).trim())))),
      );
      expect(said.sort()).toEqual(['held', 'refused', 'refused', 'refused']);
    } finally {
      for (const p of racers) p.kill('SIGKILL');
    }
  }, 60_000);

  it('a socket file left by a process killed while holding it blocks nothing', async () => {
    const dir = fresh();
    mkdirSync(dir);
    const path = lockAddress(dir, 'darwin');
    // A process that binds the socket file and is SIGKILLed: the file stays, nobody answers on it.
    const child = spawn(
      process.execPath,
      ['-e', `require('net').createServer().listen(${JSON.stringify(path)}, () => console.log('up'))`],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await new Promise((r) => child.stdout.once('data', r));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const lock = await lockDataDir(dir, 'darwin');
    await lock.release();
  });

  it('a lock held by another live process is refused with its pid, and free once it dies', async () => {
    const dir = fresh();
    mkdirSync(dir);
    const child = spawn(
      process.execPath,
      [
        ...FROM_SOURCES,
        '--input-type=module',
        '-e',
        `import('${sourceUrl('store/owner.ts')}').then(m => m.lockDataDir(${JSON.stringify(dir)})).then(() => console.log('held'), (e) => console.log(e.message)); setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await new Promise((r) => child.stdout.once('data', r));
      const err = await lockDataDir(dir).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DirHeld);
      expect((err as DirHeld).pid).toBe(child.pid);
    } finally {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    }
    await (await lockDataDir(dir)).release();
  }, 30_000);
});

/** What the holder of a lock says on connecting (its pid), or null when nothing listens. */
function answer(path: string): Promise<string | null> {
  return new Promise((resolve) => {
    let said = '';
    const s = net.connect({ path });
    s.setEncoding('utf8');
    s.on('data', (c: string) => {
      said += c;
    });
    s.on('end', () => resolve(said.trim()));
    s.on('error', () => resolve(null));
  });
}
