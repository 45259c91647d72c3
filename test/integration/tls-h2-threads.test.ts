import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { ClientHttp2Session } from 'node:http2';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { h2request } from '../helpers/h2.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { h2tls, handshake, httpsOn, peerPrint } from '../helpers/tls-client.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where two threads share the port (on an older Node these tests skip).

/**
 * Issue #37 with two edge threads, through the gateway as a child process: a SIGHUP
 * reload while HTTP/2 sessions over TLS and HTTP/1.1 keep-alive connections on both
 * threads keep sending.
 */
describe.runIf(hasReusePort())('TLS reload under load on two edge threads', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let dir: string;
  let g: ChildGateway;
  let url: string;

  beforeAll(async () => {
    certs = makeCerts();
    copyFileSync(certs.server.cert, join(certs.dir, 'live.pem'));
    copyFileSync(certs.server.key, join(certs.dir, 'live.key'));
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    dir = mkdtempSync(join(tmpdir(), 'wakegate-tls-h2-threads-'));
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
    url = `https://localhost:${g.port}`;
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

  it('reloads on SIGHUP with h2 and HTTP/1.1 keep-alive load on both threads: no error, old sessions keep the old certificate, new connections on each thread get the new', async () => {
    const old = certs.server.fingerprint;
    /** Sessions by the thread serving them: opened until each thread has two (the kernel spreads connections). */
    const sessions: { s: ClientHttp2Session; socket: tls.TLSSocket; thread: string }[] = [];
    const onThread = (n: string) => sessions.filter((x) => x.thread === n).length;
    for (let i = 0; i < 60 && (onThread('1') < 2 || onThread('2') < 2); i++) {
      const c = await h2tls(url, certs.caPem);
      const thread = String((await h2request(c.s, { ':path': '/free/which' })).headers['x-wakegate-thread']);
      if (onThread(thread) < 2) sessions.push({ ...c, thread });
      else c.s.close();
    }
    expect([onThread('1'), onThread('2')]).toEqual([2, 2]);
    for (const { socket } of sessions) expect(peerPrint(socket.getPeerCertificate())).toBe(old);

    const agent = new https.Agent({ keepAlive: true, maxSockets: 4, ca: certs.caPem });
    const failures: string[] = [];
    const h1threads = new Set<string>();
    let h2done = 0;
    let h1done = 0;
    let going = true;
    const h2loop = async (s: ClientHttp2Session) => {
      // A failure ends the loop: a closed session fails at once, and would spin.
      while (going && failures.length === 0) {
        try {
          const r = await h2request(s, { ':path': '/free/h2' });
          if (r.status !== 200) failures.push(`h2 ${r.status}`);
        } catch (e) {
          failures.push(`h2 ${(e as Error).message}`);
        }
        h2done++;
      }
    };
    const h1loop = async () => {
      // A failure ends the loop: a closed session fails at once, and would spin.
      while (going && failures.length === 0) {
        try {
          const r = await httpsOn(`${url}/free/h1`, agent);
          if (r.status !== 200) failures.push(`h1 ${r.status}`);
          if (r.thread) h1threads.add(r.thread);
        } catch (e) {
          failures.push(`h1 ${(e as Error).message}`);
        }
        h1done++;
      }
    };
    // Four sessions of three concurrent streams each, and four keep-alive connections.
    const loops = [...sessions.flatMap(({ s }) => [1, 2, 3].map(() => h2loop(s))), ...[1, 2, 3, 4].map(() => h1loop())];
    const until = async (ok: () => boolean) => {
      for (let i = 0; i < 2000 && !ok() && failures.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(failures).toEqual([]);
      expect(ok()).toBe(true);
    };
    const next = certs.make('next', 'after-sighup', ['DNS:localhost', 'IP:127.0.0.1']);
    try {
      await until(() => h2done >= 60 && h1done >= 30);
      copyFileSync(next.cert, join(certs.dir, 'live.pem'));
      copyFileSync(next.key, join(certs.dir, 'live.key'));
      g.proc.kill('SIGHUP');
      // New connections on each thread see the new certificate, within a bounded number of handshakes.
      const renewed = new Set<string>();
      for (let i = 0; i < 400 && renewed.size < 2; i++) {
        const h = await handshake(g.port, { ca: certs.caPem, path: '/free/x' });
        const thread = /x-wakegate-thread: (\d+)/i.exec(h.response)?.[1];
        if (thread && peerPrint(h.peer) === next.fingerprint) renewed.add(thread);
      }
      expect([...renewed].sort()).toEqual(['1', '2']);
      // The load goes on after the reload, on the sessions and connections opened before it.
      const [a2, a1] = [h2done, h1done];
      await until(() => h2done >= a2 + 60 && h1done >= a1 + 30);
    } finally {
      going = false;
      await Promise.all(loops);
    }
    expect(failures).toEqual([]);
    expect(g.stderr()).toContain('TLS certificates reloaded');
    // Sessions from before, on both threads, are still open and serving on the old certificate.
    for (const { s, socket, thread } of sessions) {
      expect(s.closed || s.destroyed).toBe(false);
      expect(peerPrint(socket.getPeerCertificate())).toBe(old);
      const r = await h2request(s, { ':path': '/free/after' });
      expect([r.status, String(r.headers['x-wakegate-thread'])]).toEqual([200, thread]);
      s.close();
    }
    expect((await httpsOn(`${url}/free/kept`, agent)).cert).toBe(old);
    agent.destroy();
    // A new h2 session sees the new certificate.
    const fresh = await h2tls(url, certs.caPem);
    try {
      expect(peerPrint(fresh.socket.getPeerCertificate())).toBe(next.fingerprint);
      expect((await h2request(fresh.s, { ':path': '/free/fresh' })).status).toBe(200);
    } finally {
      fresh.s.close();
    }
    expect(g.proc.exitCode).toBeNull();
  }, 60_000);
});
