import { copyFileSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2request } from '../helpers/h2.js';
import { F, frame, hpack, RawH2, request, rstStream, T } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { h2tls, handshake, httpsOn, peerPrint } from '../helpers/tls-client.js';
import { mixedLoad } from '../helpers/tls-load.js';

const C = http2.constants;

/**
 * Issue #37 under load, through the real listener over TLS: a certificate reload while
 * HTTP/2 sessions (concurrent streams each) and HTTP/1.1 keep-alive clients keep
 * sending, and a rapid-reset attack over TLS beside clients that must stay served.
 */
describe('TLS with HTTP/2 and HTTP/1.1 under load', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  let url: string;

  beforeAll(async () => {
    certs = makeCerts();
    copyFileSync(certs.server.cert, `${certs.dir}/live.pem`);
    copyFileSync(certs.server.key, `${certs.dir}/live.key`);
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway(
      {
        server: {
          tls: { certificates: [{ cert: `${certs.dir}/live.pem`, key: `${certs.dir}/live.key` }] },
          http2_limits: { max_concurrent_streams: 100, max_header_list_bytes: 65_536, max_resets_per_10s: 100 },
        },
        routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      },
      // No file watching: the reload is SIGHUP's call, made by the test.
      { tlsWatch: { watch: () => () => {}, debounceMs: 0 } },
    );
    port = Number(new URL(t.url).port);
    url = `https://localhost:${port}`;
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
    certs?.cleanup();
  });

  const metric = async (name: string) => {
    const text = await (await fetch(`${t.opsUrl}/metrics`)).text();
    return text.split('\n').filter((l) => l.startsWith(name));
  };

  it('reloads the certificate under h2 and HTTP/1.1 keep-alive load: no error, old sessions keep the old one, new connections get the new', async () => {
    const old = certs.server.fingerprint;
    let fresh = '';
    const sessions = await Promise.all([1, 2, 3].map(() => h2tls(url, certs.caPem)));
    for (const { socket } of sessions) {
      expect(socket.alpnProtocol).toBe('h2');
      expect(peerPrint(socket.getPeerCertificate())).toBe(old);
    }
    const agent = new https.Agent({ keepAlive: true, maxSockets: 3, ca: certs.caPem });
    // Three sessions of four concurrent streams each, and three keep-alive connections.
    const load = mixedLoad({ sessions: sessions.map((x) => x.s), perSession: 4, agent, h1: 3, url, prefix: '/open' });
    try {
      await load.until(() => load.h2done >= 60 && load.h1done >= 30);

      const next = certs.make('next', 'localhost-next', ['DNS:localhost', 'IP:127.0.0.1']);
      copyFileSync(next.cert, `${certs.dir}/live.pem`);
      copyFileSync(next.key, `${certs.dir}/live.key`);
      fresh = next.fingerprint;
      expect(t.gw.reloadTls()).toBe(true);
      // New connections: the new certificate, seen within a bounded number of handshakes.
      let seen = '';
      for (let i = 0; i < 50 && seen !== next.fingerprint; i++)
        seen = peerPrint((await handshake(port, { ca: certs.caPem })).peer);
      expect(seen).toBe(next.fingerprint);
      const s = await h2tls(url, certs.caPem);
      try {
        expect(peerPrint(s.socket.getPeerCertificate())).toBe(next.fingerprint);
        expect((await h2request(s.s, { ':path': '/open/fresh' })).status).toBe(200);
      } finally {
        s.s.close();
      }
      // The load goes on after the reload, on the sessions opened before it.
      const [a2, a1] = [load.h2done, load.h1done];
      await load.until(() => load.h2done >= a2 + 60 && load.h1done >= a1 + 30);
    } finally {
      await load.stop();
    }
    expect(load.failures).toEqual([]);
    // Sessions opened before the reload are still open and serving, on the old certificate.
    for (const { s, socket } of sessions) {
      expect(s.closed || s.destroyed).toBe(false);
      expect(peerPrint(socket.getPeerCertificate())).toBe(old);
      expect((await h2request(s, { ':path': '/open/after' })).status).toBe(200);
      s.close();
    }
    // A keep-alive connection from before is still the old certificate's; a new one is the new's.
    const kept = await httpsOn(`${url}/open/kept`, agent);
    expect(kept).toEqual({ status: 200, cert: old });
    agent.destroy();
    const agent2 = new https.Agent({ keepAlive: false, ca: certs.caPem });
    expect(await httpsOn(`${url}/open/new`, agent2)).toEqual({ status: 200, cert: fresh });
    agent2.destroy();
    expect(await metric('wakegate_tls_reloads_total')).toEqual(['wakegate_tls_reloads_total{listener="main"} 1']);
  }, 60_000);

  it('rapid reset over TLS h2: the attacker gets GOAWAY ENHANCE_YOUR_CALM and is counted; an h2 and an HTTP/1.1 client beside it get every answer', async () => {
    const counted = async () =>
      Number(/ (\d+)$/.exec((await metric('wakegate_h2_goaway_total{reason="rapid_reset"}'))[0] ?? '')?.[1] ?? 0);
    const before = await counted();
    const other = await h2tls(url, certs.caPem);
    const agent = new https.Agent({ keepAlive: true, maxSockets: 2, ca: certs.caPem });
    const answers: number[] = [];
    let going = true;
    let bad = false;
    /** Answers until told to stop, or until one is not a 200 (a closed session fails at once, and would spin). */
    const loop = async (one: () => Promise<{ status: number }>) => {
      while (going && !bad) {
        const status = (await one().catch(() => ({ status: -1 }))).status;
        answers.push(status);
        if (status !== 200) bad = true;
      }
    };
    const h2loop = () => loop(() => h2request(other.s, { ':path': '/open/beside' }));
    const h1loop = () => loop(() => httpsOn(`${url}/open/beside1`, agent));
    const loops = [h2loop(), h2loop(), h2loop(), h1loop(), h1loop()];
    let attacker: RawH2 | null = null;
    try {
      attacker = await RawH2.connectTls(port, certs.caPem);
      const c = attacker;
      // HEADERS + RST_STREAM(CANCEL) pairs, well past max_resets_per_10s (100), until the GOAWAY.
      let id = 1;
      for (let round = 0; round < 20 && !c.closed && c.goawayCode() === null; round++) {
        const burst: Buffer[] = [];
        for (let i = 0; i < 25; i++, id += 2) {
          burst.push(frame(T.HEADERS, F.END_STREAM | F.END_HEADERS, id, hpack(request('/open/r', 'GET', 'https'))));
          burst.push(rstStream(id, C.NGHTTP2_CANCEL));
        }
        c.write(Buffer.concat(burst));
        await new Promise((r) => setTimeout(r, 5));
      }
      expect(await c.closedWithin(5000)).toBe(true);
      expect(c.goawayCode()).toBe(C.NGHTTP2_ENHANCE_YOUR_CALM);
      // The attack's streams were never answered.
      expect(c.frames.filter((f) => f.type === T.DATA)).toEqual([]);
      // The others keep being served after it, too.
      const at = answers.length;
      for (let i = 0; i < 2000 && answers.length < at + 50 && !bad; i++) await new Promise((r) => setTimeout(r, 5));
    } finally {
      going = false;
      await Promise.all(loops);
      attacker?.destroy();
    }
    expect(answers.length).toBeGreaterThan(50);
    expect(answers.filter((s) => s !== 200)).toEqual([]);
    expect(other.s.closed || other.s.destroyed).toBe(false);
    expect((await h2request(other.s, { ':path': '/open/last' })).status).toBe(200);
    other.s.close();
    agent.destroy();
    expect(await counted()).toBe(before + 1);
  }, 60_000);
});
