import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasReusePort } from '../../src/startup.js';
import { type Handshake, handshake } from '../helpers/tls-client.js';
import { startTlsChild, type TlsChild } from '../helpers/tls-load.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where two threads share the port (on an older Node these tests skip).

/** TLS with two edge threads, through the gateway as a child process: tickets and reloads reach every thread. */
describe.runIf(hasReusePort())('TLS on two edge threads', () => {
  let t: TlsChild;

  beforeAll(async () => {
    t = await startTlsChild('tls-threads');
  }, 60_000);
  afterAll(() => t?.stop());

  const thread = (h: Handshake) => /x-wakegate-thread: (\d+)/i.exec(h.response)?.[1];
  /** Handshakes until one lands on each thread (the kernel spreads connections). */
  async function onEach(session?: Buffer): Promise<Map<string, Handshake>> {
    const seen = new Map<string, Handshake>();
    for (let i = 0; i < 200 && seen.size < 2; i++) {
      const h = await handshake(t.g.port, { ca: t.certs.caPem, path: '/free/x', ...(session ? { session } : {}) });
      const n = thread(h);
      if (n && !seen.has(n)) seen.set(n, h);
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
    const next = t.certs.make('next', 'after-sighup', ['DNS:localhost', 'IP:127.0.0.1']);
    copyFileSync(next.cert, join(t.certs.dir, 'live.pem'));
    copyFileSync(next.key, join(t.certs.dir, 'live.key'));
    t.g.proc.kill('SIGHUP');
    for (let i = 0; i < 200 && !t.g.stderr().includes('TLS certificates reloaded'); i++)
      await new Promise((r) => setTimeout(r, 10));
    // The message to the edge threads follows the log line: give it a moment to land.
    await new Promise((r) => setTimeout(r, 100));
    const after = await onEach();
    expect(after.get('1')?.peer.subject.CN).toBe('after-sighup');
    expect(after.get('2')?.peer.subject.CN).toBe('after-sighup');
    expect(t.g.proc.exitCode).toBeNull();
  });
});
