import { copyFileSync } from 'node:fs';
import type { ClientHttp2Session } from 'node:http2';
import https from 'node:https';
import { join } from 'node:path';
import type tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasReusePort } from '../../src/startup.js';
import { h2request } from '../helpers/h2.js';
import { h2tls, handshake, httpsOn, peerPrint } from '../helpers/tls-client.js';
import { mixedLoad, startTlsChild, type TlsChild } from '../helpers/tls-load.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where two threads share the port (on an older Node these tests skip).

/**
 * Issue #37 with two edge threads, through the gateway as a child process: a SIGHUP
 * reload while HTTP/2 sessions over TLS and HTTP/1.1 keep-alive connections on both
 * threads keep sending.
 */
describe.runIf(hasReusePort())('TLS reload under load on two edge threads', () => {
  let t: TlsChild;

  beforeAll(async () => {
    t = await startTlsChild('tls-h2-threads');
  }, 60_000);
  afterAll(() => t?.stop());

  it('reloads on SIGHUP with h2 and HTTP/1.1 keep-alive load on both threads: no error, old sessions keep the old certificate, new connections on each thread get the new', async () => {
    const { certs, g, url } = t;
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
    const load = mixedLoad({ sessions: sessions.map((x) => x.s), perSession: 3, agent, h1: 4, url, prefix: '/free' });
    const next = certs.make('next', 'after-sighup', ['DNS:localhost', 'IP:127.0.0.1']);
    try {
      await load.until(() => load.h2done >= 60 && load.h1done >= 30);
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
      const [a2, a1] = [load.h2done, load.h1done];
      await load.until(() => load.h2done >= a2 + 60 && load.h1done >= a1 + 30);
    } finally {
      await load.stop();
    }
    expect(load.failures).toEqual([]);
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
