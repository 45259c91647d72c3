import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { httpsGet } from '../helpers/tls-client.js';

/** The console and /v2 over TLS: server.ops_tls on the ops listener, management.tls on a separate one. */
describe('TLS on the ops and management listeners', () => {
  let certs: TestCerts;
  let ops: TestGateway;
  let separate: TestGateway;

  beforeAll(async () => {
    certs = makeCerts();
    const tls = { certificates: [{ cert: certs.server.cert, key: certs.server.key }] };
    ops = await startGateway({ server: { ops_tls: tls } });
  });
  afterAll(async () => {
    await ops?.cleanup();
    await separate?.cleanup();
    certs?.cleanup();
  });

  const https = (url: string) => url.replace('http://', 'https://');
  const auth = (t: TestGateway) => ({ authorization: `Bearer ${t.admin}` });

  it('serves /metrics, /healthz, /v2 and the console on the ops listener over TLS only', async () => {
    const base = https(ops.opsUrl);
    expect((await httpsGet(`${base}/healthz`, { ca: certs.caPem })).status).toBe(200);
    const m = await httpsGet(`${base}/metrics`, { ca: certs.caPem });
    expect(m.body).toMatch(/wakegate_tls_certificate_expiry_timestamp_seconds\{listener="ops",index="0"\} \d{10}/);
    const keys = await httpsGet(`${base}/v2/api-keys`, { ca: certs.caPem, headers: auth(ops) });
    expect(keys.status).toBe(200);
    expect((await httpsGet(`${base}/console/`, { ca: certs.caPem })).status).toBe(200);
    // Plain HTTP on that port is no handshake: refused, and counted.
    await expect(fetch(`${ops.opsUrl}/healthz`)).rejects.toThrow();
    const after = await httpsGet(`${base}/metrics`, { ca: certs.caPem });
    expect(after.body).toMatch(/wakegate_tls_handshake_failures_total\{listener="ops"\} [1-9]/);
    // The main listener stays plain.
    expect((await fetch(`${ops.url}/v2/api-keys`, { headers: auth(ops) })).status).toBe(200);
  });

  it('serves /v2 on a separate management listener over TLS, the ops listener staying plain', async () => {
    // One embedded store per process: the first gateway goes first.
    await ops.cleanup();
    const tls = { certificates: [{ cert: certs.server.cert, key: certs.server.key }] };
    separate = await startGateway({ management: { listener: 'separate', port: 0, tls } });
    const r = await httpsGet(`${https(separate.managementUrl)}/v2/api-keys`, {
      ca: certs.caPem,
      headers: auth(separate),
    });
    expect(r.status).toBe(200);
    expect((await fetch(`${separate.opsUrl}/healthz`)).status).toBe(200);
  });

  it('refuses management.tls without a separate listener', () => {
    expect(() =>
      loadConfig({
        values: { management: { tls: { certificates: [{ cert: 'a', key: 'b' }] } } },
      }),
    ).toThrow('config: management.tls: applies to the separate management listener');
  });
});
