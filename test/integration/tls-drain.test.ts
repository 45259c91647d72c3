import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { httpsGet } from '../helpers/tls-client.js';

/** Over TLS, the listener's bounds and its drain hold as on plain HTTP. */
describe('TLS listener bounds and drain', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    certs = makeCerts();
    origin = await startServer((req, res) => {
      req.resume();
      setTimeout(() => res.end('late'), req.url?.includes('slow') ? 400 : 0).unref();
    });
    t = await startGateway(
      {
        server: {
          max_connections: 3,
          tls: { certificates: [{ cert: certs.server.cert, key: certs.server.key }] },
        },
        routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      },
      { testHooks: true },
    );
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
    certs?.cleanup();
  });

  /** A TLS connection held open: resolves once secure, or with 'refused' if it is closed first. */
  const hold = () =>
    new Promise<tls.TLSSocket | 'refused'>((resolve) => {
      const s = tls.connect({ host: '127.0.0.1', port, ca: certs.caPem, servername: 'localhost' });
      s.once('secureConnect', () => resolve(s));
      s.on('error', () => resolve('refused'));
      s.once('close', () => resolve('refused'));
    });

  it('holds max_connections: a connection past it is refused, then served once one closes', async () => {
    const held = await Promise.all([hold(), hold(), hold()]);
    expect(held.every((s) => s !== 'refused')).toBe(true);
    expect(await hold()).toBe('refused');
    (held[0] as tls.TLSSocket).destroy();
    await new Promise((r) => setTimeout(r, 50));
    const r = await httpsGet(`https://127.0.0.1:${port}/open/after`, { ca: certs.caPem });
    expect(r.status).toBe(200);
    expect(r.headers['x-wakegate-thread']).toBe('1');
    for (const s of held.slice(1)) (s as tls.TLSSocket).destroy();
    await new Promise((r) => setTimeout(r, 50));
  });

  it('drains: a request in flight when the stop begins is answered, with Connection: close', async () => {
    const inFlight = httpsGet(`https://127.0.0.1:${port}/open/slow`, { ca: certs.caPem });
    await new Promise((r) => setTimeout(r, 100));
    const stopped = t.stop();
    const r = await inFlight;
    expect(r.status).toBe(200);
    expect(r.body).toBe('late');
    expect(r.headers.connection).toBe('close');
    await stopped;
    expect(await hold()).toBe('refused');
  });
});
