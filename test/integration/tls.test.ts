import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { copyFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';
import { handshake, httpsGet } from '../helpers/tls-client.js';
import { manualTlsWatch } from '../helpers/tls-watch.js';

/** TLS on the main listener: SNI, session tickets, reloads without a restart (issue #37). */
describe('TLS at the edge', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let url: string;
  let port: number;
  const watch = manualTlsWatch();

  beforeAll(async () => {
    certs = makeCerts();
    // The files the gateway serves, which the tests replace.
    copyFileSync(certs.server.cert, `${certs.dir}/live.pem`);
    copyFileSync(certs.server.key, `${certs.dir}/live.key`);
    origin = await echoOrigin('prod');
    t = await startGateway(
      {
        server: {
          tls: {
            certificates: [
              { cert: `${certs.dir}/live.pem`, key: `${certs.dir}/live.key` },
              { cert: certs.other.cert, key: certs.other.key },
            ],
          },
        },
        routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      },
      { log: watch.log, tlsWatch: watch.tlsWatch },
    );
    port = Number(new URL(t.url).port);
    url = `https://127.0.0.1:${port}`;
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
  const reloaded = watch.reloaded;

  it('proxies over TLS, and tells the origin the client spoke https', async () => {
    const r = await httpsGet(`${url}/open/x`, { ca: certs.caPem });
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.body) as { rawHeaders: string[] };
    const i = seen.rawHeaders.findIndex((h) => h.toLowerCase() === 'x-forwarded-proto');
    expect(seen.rawHeaders[i + 1]).toBe('https');
    expect(r.headers['x-wake-id']).toBeTruthy();
  });

  it('is served to curl, verified against the test CA, by name through SNI', async () => {
    // Asynchronously: the gateway serves from this very process.
    const curl = async (args: string[]) => (await promisify(execFile)('curl', args)).stdout;
    const out = await curl([
      '-sS',
      '--cacert',
      certs.ca,
      '--resolve',
      `a.test:${port}:127.0.0.1`,
      '-o',
      '/dev/null',
      '-w',
      '%{http_code} %{ssl_verify_result}',
      `https://a.test:${port}/open/curl`,
    ]);
    expect(out).toBe('200 0');
    const b = await curl([
      '-sS',
      '--cacert',
      certs.ca,
      '--resolve',
      `x.b.test:${port}:127.0.0.1`,
      '-o',
      '/dev/null',
      '-w',
      '%{http_code}',
      `https://x.b.test:${port}/open/curl`,
    ]);
    expect(b).toBe('200');
  });

  it('picks the certificate by SNI, the first for unknown names', async () => {
    expect((await handshake(port, { ca: certs.caPem, servername: 'b.test' })).peer.subject.CN).toBe('b.test');
    expect((await handshake(port, { ca: certs.caPem, servername: 'a.test' })).peer.subject.CN).toBe('localhost');
    const unknown = await handshake(port, { ca: certs.caPem, servername: 'localhost' });
    expect(unknown.peer.subject.CN).toBe('localhost');
    expect(unknown.alpn).toBe(false);
    // server.http2 (true by default) offers h2 beside http/1.1; a client that asks only http/1.1 gets it.
    expect((await handshake(port, { ca: certs.caPem, alpn: ['h2', 'http/1.1'] })).alpn).toBe('h2');
    expect((await handshake(port, { ca: certs.caPem, alpn: ['http/1.1'] })).alpn).toBe('http/1.1');
  });

  it('resumes a session on a new connection with its ticket', async () => {
    const first = await handshake(port, { ca: certs.caPem });
    expect(first.reused).toBe(false);
    expect(first.session).not.toBeNull();
    const again = await handshake(port, { ca: certs.caPem, session: first.session as Buffer });
    expect(again.reused).toBe(true);
  });

  it('reloads a replaced certificate for new connections, with no error under keep-alive load', async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 4, ca: certs.caPem });
    let errors = 0;
    let done = 0;
    let going = true;
    const loop = async () => {
      while (going) {
        try {
          const r = await httpsGet(`${url}/open/load`, { ca: certs.caPem, agent });
          if (r.status !== 200) errors++;
        } catch {
          errors++;
        }
        done++;
      }
    };
    const loops = [loop(), loop(), loop(), loop()];
    while (done < 40) await new Promise((r) => setTimeout(r, 5));
    const next = certs.make('next', 'localhost-next', ['DNS:localhost', 'IP:127.0.0.1']);
    copyFileSync(next.cert, `${certs.dir}/live.pem`);
    copyFileSync(next.key, `${certs.dir}/live.key`);
    const said = await reloaded();
    expect(said.join('')).toContain('TLS certificates reloaded');
    const at = done;
    while (done < at + 40) await new Promise((r) => setTimeout(r, 5));
    going = false;
    await Promise.all(loops);
    agent.destroy();
    expect(errors).toBe(0);
    expect((await handshake(port, { ca: certs.caPem })).peer.subject.CN).toBe('localhost-next');
    // Tickets made before the reload still resume: the ticket keys are put back on the new context.
    const s = await handshake(port, { ca: certs.caPem });
    expect((await handshake(port, { ca: certs.caPem, session: s.session as Buffer })).reused).toBe(true);
    expect(await metric('wakegate_tls_reloads_total')).toEqual(['wakegate_tls_reloads_total{listener="main"} 1']);
  });

  it('keeps the old certificate serving when the new file does not load: one log line and a metric', async () => {
    writeFileSync(`${certs.dir}/live.pem`, 'not a certificate\n');
    const said = await reloaded();
    expect(said).toHaveLength(1);
    expect(said[0]).toContain('TLS certificates not reloaded');
    expect(said[0]).toContain('server.tls.certificates[0].cert');
    expect((await handshake(port, { ca: certs.caPem })).peer.subject.CN).toBe('localhost-next');
    expect(await metric('wakegate_tls_reload_failures_total')).toEqual([
      'wakegate_tls_reload_failures_total{listener="main"} 1',
    ]);
    // SIGHUP's path: the same reload, and the same refusal.
    expect(t.gw.reloadTls()).toBe(false);
    const expiry = await metric('wakegate_tls_certificate_expiry_timestamp_seconds');
    expect(expiry).toHaveLength(2);
    expect(Number(expiry[0]?.split(' ')[1])).toBeGreaterThan(Date.now() / 1000);
  });
});

describe('TLS certificate files swapped for what is no PEM file', () => {
  let certs: TestCerts;
  let t: TestGateway;
  let port: number;
  const lines: string[] = [];
  let writer: ChildProcess | null = null;

  beforeAll(async () => {
    certs = makeCerts();
    copyFileSync(certs.server.cert, `${certs.dir}/swap.pem`);
    t = await startGateway(
      {
        server: { tls: { certificates: [{ cert: `${certs.dir}/swap.pem`, key: certs.server.key }] } },
        routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: 'http://127.0.0.1:9' } }],
      },
      {
        log: createLogger('info', (l) => lines.push(l)),
        tlsWatch: { watch: () => () => {}, debounceMs: 0 },
      },
    );
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    writer?.kill();
    await t?.cleanup();
    certs?.cleanup();
  });

  it('a certificate replaced without its key (the old key does not match it) is refused; the old pair serves on', async () => {
    const swap = `${certs.dir}/swap.pem`;
    const next = certs.make('mismatch', 'localhost-mismatch', ['DNS:localhost', 'IP:127.0.0.1']);
    rmSync(swap, { force: true });
    copyFileSync(next.cert, swap);
    const before = lines.length;
    expect(t.gw.reloadTls()).toBe(false);
    const said = lines.slice(before).join('');
    expect(said).toContain('server.tls.certificates[0].key');
    expect(said).toContain('does not load with');
    expect((await handshake(port, { ca: certs.caPem })).peer.subject.CN).toBe('localhost');
    copyFileSync(certs.server.cert, swap);
  });

  it('a FIFO, a device or a huge file in its place is refused at once; the old certificate serves on', async () => {
    const swap = `${certs.dir}/swap.pem`;
    // A FIFO whose writer (the certificate itself) comes only later: reading it would block the thread until then.
    execFileSync('mkfifo', [`${certs.dir}/fifo`]);
    writer = spawn('sh', ['-c', `sleep 3; cat ${certs.server.cert} > ${certs.dir}/fifo`]);
    const huge = `${certs.dir}/huge.pem`;
    writeFileSync(huge, '');
    truncateSync(huge, 64 * 1024 * 1024);
    for (const [target, reason] of [
      [`${certs.dir}/fifo`, 'is not a regular file'],
      ['/dev/zero', 'is not a regular file'],
      [huge, 'larger than'],
    ] as const) {
      rmSync(swap);
      symlinkSync(target, swap);
      const before = lines.length;
      const t0 = performance.now();
      expect(t.gw.reloadTls(), target).toBe(false);
      expect(performance.now() - t0, target).toBeLessThan(1000);
      expect(lines.slice(before).join(''), target).toContain(reason);
      expect((await handshake(port, { ca: certs.caPem })).peer.subject.CN).toBe('localhost');
    }
  });
});
