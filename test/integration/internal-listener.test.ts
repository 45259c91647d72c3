import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where its two edge threads hand /v2 calls over (on an older Node this skips).

/**
 * The control thread's internal listener (loopback, where edge threads hand /v2 calls
 * over) against a local user who opens idle connections to it: /v2 on the main
 * listener keeps answering. Needs two edge threads (SO_REUSEPORT: Node 22.12 or later
 * on Linux); the same rule is held on every runtime by test/unit/internal-listener.test.ts.
 */
const admin = `svc_live_${newSecret()}`;

/** The loopback TCP ports `pid` listens on (Linux: /proc). */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1] as string);
    } catch {}
  }
  const ports: number[] = [];
  for (const line of readFileSync(`/proc/${pid}/net/tcp`, 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    // local address, state 0A (LISTEN), inode
    if (f.length > 9 && f[3] === '0A' && inodes.has(f[9] as string)) {
      const [addr, port] = (f[1] as string).split(':');
      if (addr === '0100007F') ports.push(Number.parseInt(port as string, 16));
    }
  }
  return ports;
}

const threads = process.platform === 'linux' && hasReusePort();

describe.skipIf(!threads)('internal listener with two edge threads (child gateway)', () => {
  let dir: string;
  let g: ChildGateway;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-internal-'));
    writeFileSync(join(dir, 'cfg.yaml'), 'server: { threads: 2 }\nlog: { level: info }\n');
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: admin,
    });
  }, 60_000);
  afterAll(async () => {
    g?.proc.kill('SIGTERM');
    await g?.exited;
    rmSync(dir, { recursive: true, force: true });
  });

  it('100 idle connections to the internal port: /v2 calls on the main listener still answer', async () => {
    const internal = listeningPorts(g.proc.pid as number).filter((p) => p !== g.port && p !== g.opsPort);
    expect(internal.length).toBeGreaterThan(0);
    const idle = internal.flatMap((port) =>
      Array.from({ length: 100 }, () => {
        const s = net.connect(port, '127.0.0.1');
        s.on('error', () => {});
        return s;
      }),
    );
    try {
      await new Promise((r) => setTimeout(r, 200));
      const answers = await Promise.all(
        Array.from({ length: 20 }, () =>
          fetch(`${g.url}/v2/api-keys`, {
            headers: { authorization: `Bearer ${admin}`, connection: 'close' },
            signal: AbortSignal.timeout(10_000),
          }).then((r) => r.status),
        ),
      );
      expect(answers).toEqual(answers.map(() => 200));
    } finally {
      for (const s of idle) s.destroy();
    }
  }, 60_000);
});

it.runIf(process.platform === 'linux')(
  "listeningPorts finds a child gateway's main and ops ports",
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-internal-'));
    writeFileSync(join(dir, 'cfg.yaml'), 'log: { level: info }\n');
    const g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: admin,
    });
    try {
      expect(listeningPorts(g.proc.pid as number)).toEqual(expect.arrayContaining([g.port, g.opsPort]));
    } finally {
      g.proc.kill('SIGTERM');
      await g.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  },
  60_000,
);
