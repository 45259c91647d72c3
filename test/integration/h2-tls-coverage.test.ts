import http2 from 'node:http2';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2request } from '../helpers/h2.js';
import { F, frame, hpack, RawH2, request, rstStream, T } from '../helpers/h2-frames.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Coverage from a review of the HTTP/2 and TLS edge: what held up when attacked through the listener and was
 * not covered before: min_version on an SNI-picked certificate, auth: mtls over HTTP/2
 * on an SNI-picked certificate and a key revoked mid-session, and
 * max_buffered_request_bytes across the streams of one HTTP/2 session.
 */
describe('TLS edge: SNI contexts and mTLS over HTTP/2', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let url: string;
  let port: number;
  let keyId: string;
  beforeAll(async () => {
    certs = makeCerts();
    origin = await echoOrigin('prod');
    t = await startGateway({
      server: {
        tls: {
          min_version: 'TLSv1.3',
          certificates: [
            { cert: certs.server.cert, key: certs.server.key },
            { cert: certs.other.cert, key: certs.other.key },
          ],
          client_ca: certs.ca,
          client_auth: 'optional',
        },
      },
      routes: [
        {
          name: 'mtls',
          prefix: '/mtls',
          auth: 'mtls',
          scopes: { read: 'api:read', write: 'api:write' },
          origins: { production: origin.url },
        },
      ],
    });
    port = Number(new URL(t.url).port);
    url = `https://127.0.0.1:${port}`;
    const r = await call(t.managementUrl, t.admin, 'POST', '/v2/api-keys', {
      label: 'cert client',
      environment: 'production',
      scopes: ['api:read'],
      tls_fingerprint: certs.client.fingerprint,
    });
    expect(r.status).toBe(201);
    keyId = r.body.id as string;
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
    certs?.cleanup();
  });

  const handshake = (servername: string, maxVersion: tls.SecureVersion) =>
    new Promise<{ ok: boolean; cn?: string }>((resolve) => {
      const s = tls.connect({ host: '127.0.0.1', port, ca: certs.caPem, servername, maxVersion }, () => {
        const cn = String(s.getPeerCertificate().subject?.CN);
        s.destroy();
        resolve({ ok: true, cn });
      });
      s.on('error', () => resolve({ ok: false }));
    });

  it('min_version holds whichever certificate SNI picks', async () => {
    expect(await handshake('b.test', 'TLSv1.3')).toEqual({ ok: true, cn: 'b.test' });
    expect(await handshake('b.test', 'TLSv1.2')).toEqual({ ok: false });
    expect(await handshake('x.b.test', 'TLSv1.2')).toEqual({ ok: false });
    expect(await handshake('localhost', 'TLSv1.2')).toEqual({ ok: false });
  });

  it('auth: mtls over h2 on an SNI-picked certificate; a key revoked mid-session is refused on the next stream', async () => {
    const s = http2.connect(url, {
      ca: certs.caPem,
      servername: 'b.test',
      cert: certs.client.certPem,
      key: certs.client.keyPem,
    });
    try {
      expect((await h2request(s, { ':path': '/mtls/a' })).status).toBe(200);
      const d = await call(t.managementUrl, t.admin, 'DELETE', `/v2/api-keys/${keyId}`);
      expect(d.status).toBe(200);
      const after = await h2request(s, { ':path': '/mtls/b' });
      expect(after.status).toBe(401);
      expect(JSON.parse(after.text).error).toMatchObject({ type: 'key_revoked', param: null });
    } finally {
      s.close();
    }
  });
});

describe('HTTP/2: max_buffered_request_bytes across the streams of one session', () => {
  let origin: TestServer;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await echoOrigin('prod');
    t = await startGateway({
      server: { http2: 'h2c', buffer_request_body_bytes: 8000, max_buffered_request_bytes: 10_000 },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const buffered = () => {
    // biome-ignore lint/suspicious/noExplicitAny: reads the proxy's private counter
    const p = t.gw.edge?.proxy as any;
    return p.buffered as number;
  };

  it('the stream that tips the total gets 503 with the error body; resets give every byte back', async () => {
    const c = await RawH2.connect(Number(new URL(t.url).port));
    try {
      for (let i = 0; i < 4; i++) {
        const id = 1 + 2 * i;
        const fields: [string, string][] = [...request(`/open/b${i}`, 'POST'), ['content-length', '6000']];
        c.write(frame(T.HEADERS, F.END_HEADERS, id, hpack(fields)));
        c.write(frame(T.DATA, 0, id, Buffer.alloc(3000, 0x61)));
        await pause(100);
      }
      expect(buffered()).toBe(9000);
      const until = Date.now() + 2000;
      while (Date.now() < until && !c.frames.some((f) => f.stream === 7 && f.type === T.DATA)) await pause(20);
      const body = Buffer.concat(c.frames.filter((f) => f.stream === 7 && f.type === T.DATA).map((f) => f.payload));
      const err = JSON.parse(body.toString()).error;
      expect(err).toMatchObject({ type: 'service_unavailable', param: null });
      expect(err.wake_id).toMatch(/^wk_/);
      expect(c.frames.some((f) => f.stream < 7 && f.type === T.DATA)).toBe(false);
      for (let i = 0; i < 4; i++) c.write(rstStream(1 + 2 * i, http2.constants.NGHTTP2_CANCEL));
      const until2 = Date.now() + 2000;
      while (Date.now() < until2 && buffered() !== 0) await pause(20);
      expect(buffered()).toBe(0);
    } finally {
      c.destroy();
    }
  });
});
