import { execFile } from 'node:child_process';
import http2 from 'node:http2';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

const run = promisify(execFile);

/** Issue #37: HTTP/2 by ALPN on the TLS listener (server.http2 true, the default), end to end. */
describe('HTTP/2 over TLS', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let url: string;

  const routes = () => [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }];
  // Client certificates asked for, not required: the wake of an h2 request names its connection's.
  const tls = () => ({
    certificates: [{ cert: certs.server.cert, key: certs.server.key }],
    client_ca: certs.ca,
    client_auth: 'optional',
  });

  beforeAll(async () => {
    certs = makeCerts();
    origin = await echoOrigin('prod');
    t = await startGateway({ server: { tls: tls() }, routes: routes() });
    url = t.url.replace('http://127.0.0.1', 'https://localhost');
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
    certs.cleanup();
  });

  it("Node's client chooses h2 by ALPN; the origin hears https, the wake says h2", async () => {
    const s = http2.connect(url, { ca: certs.caPem });
    try {
      const { status, body, wake, alpn } = await new Promise<{
        status: number;
        body: string;
        wake: string;
        alpn: string;
      }>((resolve, reject) => {
        const r = s.request({ ':path': '/open/tls' });
        let status = 0;
        let wake = '';
        const chunks: Buffer[] = [];
        r.on('response', (h) => {
          status = Number(h[':status']);
          wake = String(h['x-wake-id']);
        });
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () =>
          resolve({ status, body: Buffer.concat(chunks).toString(), wake, alpn: String(s.alpnProtocol) }),
        );
        r.on('error', reject);
        r.end();
      });
      expect(alpn).toBe('h2');
      expect(status).toBe(200);
      const echo = JSON.parse(body);
      expect(echo.rawHeaders).toContain('https');
      await flushed(t.gw);
      const w = await (await fetch(`${t.managementUrl}/v2/wakes/${wake}`, { headers: bearer(t.admin) })).json();
      expect(w.protocol).toBe('h2');
    } finally {
      s.close();
    }
  });

  it("an h2 request on a connection with a client certificate: the wake records the certificate's", async () => {
    const s = http2.connect(url, { ca: certs.caPem, cert: certs.client.certPem, key: certs.client.keyPem });
    try {
      const wake = await new Promise<string>((resolve, reject) => {
        const r = s.request({ ':path': '/open/mtls' });
        r.on('response', (h) => resolve(String(h['x-wake-id'])));
        r.on('error', reject);
        r.resume();
        r.end();
      });
      await flushed(t.gw);
      const w = await (await fetch(`${t.managementUrl}/v2/wakes/${wake}`, { headers: bearer(t.admin) })).json();
      expect(w).toMatchObject({ protocol: 'h2', tls_fingerprint: certs.client.fingerprint });
      expect(w.tls_subject).toMatch(/CN=client-one/);
    } finally {
      s.close();
    }
  });

  it('curl --http2 speaks h2, --http1.1 still HTTP/1.1 on the same port', async () => {
    const args = ['-sS', '--cacert', certs.ca, '-o', '/dev/null', '-w', '%{http_version} %{http_code}'];
    expect((await run('curl', [...args, '--http2', `${url}/open/c`])).stdout).toBe('2 200');
    expect((await run('curl', [...args, '--http1.1', `${url}/open/c`])).stdout).toBe('1.1 200');
  });

  it('h2load over TLS with 10 streams a connection: every request answered', async () => {
    const { stdout } = await run('h2load', ['-n', '300', '-c', '3', '-m', '10', `${url}/open/load`]);
    expect(stdout).toMatch(/Application protocol: h2/);
    expect(stdout).toMatch(/300 succeeded, 0 failed, 0 errored/);
  });

  it('server.http2 false: ALPN offers only http/1.1', async () => {
    // One embedded store per process: this gateway follows the first.
    await t.cleanup();
    const off = await startGateway({ server: { tls: tls(), http2: false }, routes: routes() });
    t = off;
    const offUrl = off.url.replace('http://127.0.0.1', 'https://localhost');
    const r = await run('curl', [
      '-sS',
      '--cacert',
      certs.ca,
      '--http2',
      '-o',
      '/dev/null',
      '-w',
      '%{http_version}',
      `${offUrl}/open/x`,
    ]);
    expect(r.stdout).toBe('1.1');
  });
});
