import { randomBytes } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';
import { httpsGet } from '../helpers/tls-client.js';

/** A real client's first flight (its ClientHello), caught by a listener that never answers. */
async function clientHello(): Promise<Buffer> {
  return new Promise((resolve) => {
    const srv = net.createServer((s) => {
      s.once('data', (b: Buffer) => {
        resolve(b);
        s.destroy();
        srv.close();
      });
    });
    srv.listen(0, '127.0.0.1', () => {
      const c = tls.connect({ port: (srv.address() as net.AddressInfo).port, host: '127.0.0.1', servername: 'a.test' });
      c.on('error', () => {});
    });
  });
}

/** Sends `bytes`, then waits until the gateway closes the connection (or `ms` pass). */
function poke(port: number, bytes: Buffer, opts: { end?: boolean; ms?: number } = {}): Promise<'closed' | 'open'> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.write(bytes);
      if (opts.end) s.end();
    });
    const timer = setTimeout(() => {
      s.destroy();
      resolve('open');
    }, opts.ms ?? 3000);
    s.on('data', () => {});
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      resolve('closed');
    });
  });
}

/** Garbage, truncated and mangled ClientHellos and plain HTTP sent to the TLS port: no crash, others served. */
describe('TLS port under hostile bytes', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    certs = makeCerts();
    origin = await echoOrigin();
    t = await startGateway({
      server: {
        headers_timeout_ms: 500,
        tls: { certificates: [{ cert: certs.server.cert, key: certs.server.key }] },
      },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
    certs?.cleanup();
  });

  const served = async () => (await httpsGet(`https://127.0.0.1:${port}/open/ok`, { ca: certs.caPem })).status;
  const failures = async () => {
    const text = await (await fetch(`${t.opsUrl}/metrics`)).text();
    return Number(/wakegate_tls_handshake_failures_total\{listener="main"\} (\d+)/.exec(text)?.[1] ?? 0);
  };

  it('drops plain HTTP, garbage and mangled hellos, and keeps serving', async () => {
    const hello = await clientHello();
    const cases: Buffer[] = [
      Buffer.from('GET / HTTP/1.1\r\nhost: x\r\n\r\n'),
      Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'),
      randomBytes(512),
      Buffer.from([0x16, 0x03, 0x01, 0xff, 0xff, 0x01]),
      Buffer.from([0x16, 0x03, 0x01, 0x00, 0x00]),
    ];
    for (let i = 0; i < 20; i++) {
      const m = Buffer.from(hello);
      // Bytes past the record header mangled: lengths, versions, extensions.
      for (let k = 0; k < 8; k++) m[5 + Math.floor(Math.random() * (m.length - 5))] = Math.floor(Math.random() * 256);
      cases.push(m);
    }
    const before = await failures();
    const results = await Promise.all(cases.map((c) => poke(port, c, { end: true })));
    expect(results.every((r) => r === 'closed')).toBe(true);
    // Truncated hellos (the client then stalls): each cut at the handshake timeout (headers_timeout_ms).
    const cuts = [1, 5, 6, 40, hello.length - 1].map((n) => poke(port, hello.subarray(0, n), { ms: 5000 }));
    expect(await Promise.all(cuts)).toEqual(['closed', 'closed', 'closed', 'closed', 'closed']);
    // A connection that says nothing at all is cut too.
    expect(await poke(port, Buffer.alloc(0), { ms: 5000 })).toBe('closed');
    expect(await served()).toBe(200);
    expect(await failures()).toBeGreaterThan(before + 20);
  });

  it('serves others while many handshakes stall', async () => {
    const stalled = Array.from({ length: 50 }, () => poke(port, Buffer.from([0x16, 0x03, 0x01]), { ms: 5000 }));
    expect(await served()).toBe(200);
    expect(new Set(await Promise.all(stalled))).toEqual(new Set(['closed']));
  });
});
