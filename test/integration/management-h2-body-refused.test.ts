// Regression tests from a review of the management listener's HTTP/2 (2026-11-28).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { newKeySecret } from '../../src/auth/secrets.js';
import { makeCerts } from '../helpers/certs.js';
import { spawnGateway } from '../helpers/child.js';

// A /v2 body past server.api_body_limit_bytes is answered 413 and its connection let go
// (management-body.ts): `req.socket.destroy()` once the answer is written. Over HTTP/2
// (the ops listener with TLS, h2 by ALPN: Node's compatibility layer) `req.socket` is a
// stand-in whose `destroy` throws ERR_HTTP2_NO_SOCKET_MANIPULATION, in a callback nothing
// catches: one request ended the process.
describe('a /v2 body too large, over HTTP/2 on the ops listener', () => {
  it('is answered 413, and the gateway serves on', async () => {
    const certs = makeCerts();
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-mgmt-h2-body-'));
    const cfg = join(dir, 'cfg.yaml');
    writeFileSync(
      cfg,
      `server:\n  api_body_limit_bytes: 1024\n  ops_tls:\n    certificates:\n      - { cert: ${certs.server.cert}, key: ${certs.server.key} }\n`,
    );
    const admin = newKeySecret('live');
    const g = await spawnGateway(['serve', '--config', cfg], {
      DATA_DIR: join(dir, 'data'),
      ORIGIN_URL: 'http://127.0.0.1:9',
      WAKEGATE_ADMIN_KEY: admin,
    });
    const s = http2.connect(`https://localhost:${g.opsPort}`, { ca: certs.caPem });
    s.on('error', () => {});
    const post = (body: string) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const r = s.request({
          ':method': 'POST',
          ':path': '/v2/api-keys',
          authorization: `Bearer ${admin}`,
          'content-type': 'application/json',
        });
        let status = 0;
        let text = '';
        r.on('response', (h) => {
          status = Number(h[':status']);
        });
        r.setEncoding('utf8');
        r.on('data', (c: string) => {
          text += c;
        });
        r.on('end', () => resolve({ status, text }));
        r.on('close', () => resolve({ status, text }));
        r.on('error', reject);
        r.end(body);
      });
    try {
      const r = await post(JSON.stringify({ label: 'x'.repeat(4096) }));
      expect(r.status, r.text).toBe(413);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(g.proc.exitCode, g.stderr()).toBeNull();
      const health = await new Promise<number>((resolve, reject) => {
        const c = http2.connect(`https://localhost:${g.opsPort}`, { ca: certs.caPem });
        c.on('error', reject);
        const r = c.request({ ':path': '/healthz' });
        r.on('response', (h) => {
          resolve(Number(h[':status']));
          c.close();
        });
        r.on('error', reject);
        r.end();
      });
      expect(health).toBe(200);
    } finally {
      s.destroy();
      g.proc.kill('SIGTERM');
      await g.exited;
      certs.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
