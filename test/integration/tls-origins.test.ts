import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

/** https:// origins: verified against the system CAs or a route's tls { ca, servername } (issue #37). */
describe('https origins', () => {
  let certs: TestCerts;
  let origin: https.Server;
  let t: TestGateway;
  const lines: string[] = [];

  beforeAll(async () => {
    certs = makeCerts();
    // Named origin.test only: the address alone does not verify, the servername does.
    const pair = certs.make('origin', 'origin.test', ['DNS:origin.test']);
    origin = https.createServer({ cert: pair.certPem, key: pair.keyPem }, (req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ sni: (req.socket as TLSSocket).servername ?? null, url: req.url }));
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    const url = `https://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    const route = (name: string, tls: Record<string, unknown> | null) => ({
      name,
      prefix: `/${name}`,
      auth: 'none',
      origins: { production: url },
      ...(tls ? { tls } : {}),
    });
    t = await startGateway(
      {
        routes: [
          route('good', { ca: certs.ca, servername: 'origin.test' }),
          route('noname', { ca: certs.ca }),
          route('wrongca', { ca: certs.otherCa, servername: 'origin.test' }),
          route('system', null),
          route('insecure', { insecure_skip_verify: true }),
        ],
      },
      { log: createLogger('info', (l) => lines.push(l)) },
    );
  });
  afterAll(async () => {
    await t?.cleanup();
    origin?.closeAllConnections();
    await new Promise((r) => origin?.close(r));
    certs?.cleanup();
  });

  const get = async (path: string) => {
    const r = await fetch(`${t.url}${path}`);
    type Body = { sni?: string; url?: string; error: { type: string; message: string; wake_id: string } };
    return { status: r.status, body: (await r.json()) as Body };
  };

  it('verifies against the route CA and sends its servername', async () => {
    const r = await get('/good/x');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ sni: 'origin.test', url: '/good/x' } as unknown);
  });

  it('answers 502 with the gateway error body when the certificate does not verify', async () => {
    for (const [path, code] of [
      ['/wrongca/x', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'],
      ['/noname/x', 'ERR_TLS_CERT_ALTNAME_INVALID'],
      ['/system/x', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'],
    ] as const) {
      const r = await get(path);
      expect(r.status, path).toBe(502);
      expect(r.body.error.type).toBe('upstream_unavailable');
      expect(r.body.error.message).toContain(code);
      expect(r.body.error.message).toContain('routes[].tls');
      expect(r.body.error.wake_id).toMatch(/^wk_/);
    }
  });

  it('skips verification only with insecure_skip_verify, and warns at start', async () => {
    expect((await get('/insecure/x')).status).toBe(200);
    const warned = lines.filter((l) => l.includes('insecure_skip_verify'));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain('"level":"warn"');
    expect(warned[0]).toContain('routes insecure');
  });
});
