import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Handshake, handshake } from '../helpers/tls-client.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where two threads share the port (on an older Node these tests skip).

/** TLS with two edge threads, through the gateway as a child process: tickets and reloads reach every thread. */
describe.runIf(hasReusePort())('TLS on two edge threads', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let dir: string;
  let g: ChildGateway;

  beforeAll(async () => {
    certs = makeCerts();
    copyFileSync(certs.server.cert, join(certs.dir, 'live.pem'));
    copyFileSync(certs.server.key, join(certs.dir, 'live.key'));
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    dir = mkdtempSync(join(tmpdir(), 'wakegate-tls-threads-'));
    writeFileSync(
      join(dir, 'cfg.yaml'),
      [
        'server:',
        '  threads: 2',
        '  tls:',
        `    certificates: [{ cert: ${join(certs.dir, 'live.pem')}, key: ${join(certs.dir, 'live.key')} }]`,
        'log: { level: info }',
        'routes:',
        `  - { name: free, prefix: /free, auth: none, origins: { production: ${origin.url} } }`,
        '',
      ].join('\n'),
    );
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: `svc_live_${newSecret()}`,
      WAKEGATE_TEST_HOOKS: '1',
    });
  }, 60_000);
  afterAll(async () => {
    if (g && g.proc.exitCode === null) {
      g.proc.kill('SIGTERM');
      await g.exited;
    }
    await origin?.close();
    rmSync(dir, { recursive: true, force: true });
    certs?.cleanup();
  });

  const thread = (h: Handshake) => /x-wakegate-thread: (\d+)/i.exec(h.response)?.[1];
  /** Handshakes until one lands on each thread (the kernel spreads connections). */
  async function onEach(session?: Buffer): Promise<Map<string, Handshake>> {
    const seen = new Map<string, Handshake>();
    for (let i = 0; i < 200 && seen.size < 2; i++) {
      const h = await handshake(g.port, { ca: certs.caPem, path: '/free/x', ...(session ? { session } : {}) });
      const t = thread(h);
      if (t && !seen.has(t)) seen.set(t, h);
    }
    expect([...seen.keys()].sort()).toEqual(['1', '2']);
    return seen;
  }

  it('resumes on one thread a session its ticket got from the other', async () => {
    const first = await onEach();
    const fromOne = first.get('1')?.session as Buffer;
    expect(fromOne).toBeTruthy();
    const resumed = await onEach(fromOne);
    // The ticket thread 1 sealed opens on thread 2: one ticket key set for the process.
    expect(resumed.get('2')?.reused).toBe(true);
    expect(resumed.get('1')?.reused).toBe(true);
  });

  it('reloads on SIGHUP on every thread', async () => {
    const next = certs.make('next', 'after-sighup', ['DNS:localhost', 'IP:127.0.0.1']);
    copyFileSync(next.cert, join(certs.dir, 'live.pem'));
    copyFileSync(next.key, join(certs.dir, 'live.key'));
    g.proc.kill('SIGHUP');
    for (let i = 0; i < 200 && !g.stderr().includes('TLS certificates reloaded'); i++)
      await new Promise((r) => setTimeout(r, 10));
    // The message to the edge threads follows the log line: give it a moment to land.
    await new Promise((r) => setTimeout(r, 100));
    const after = await onEach();
    expect(after.get('1')?.peer.subject.CN).toBe('after-sighup');
    expect(after.get('2')?.peer.subject.CN).toBe('after-sighup');
    expect(g.proc.exitCode).toBeNull();
  });
});
