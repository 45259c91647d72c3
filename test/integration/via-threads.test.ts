import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where the child gateway serves with two edge threads.

/**
 * Via (admission/via.ts) with edge threads: every thread names the gateway alike, so a
 * request that comes round to another thread than the one that sent it is still seen as
 * a loop (508), not forwarded again.
 */
describe('Via with edge threads', () => {
  let origin: TestServer;
  let dir: string;
  let port: number;
  let g: ChildGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end(String(req.headers.via));
    });
    port = await new Promise<number>((resolve, reject) => {
      const s = net.createServer();
      s.on('error', reject);
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    dir = mkdtempSync(join(tmpdir(), 'wakegate-via-threads-'));
    writeFileSync(
      join(dir, 'cfg.yaml'),
      [
        'server: { threads: 2 }',
        'routes:',
        `  - { name: self, prefix: /self, auth: none, origins: { production: "http://127.0.0.1:${port}" } }`,
        `  - { name: open, prefix: /open, auth: none, origins: { production: "${origin.url}" } }`,
      ].join('\n'),
    );
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      PORT: String(port),
      WAKEGATE_TEST_HOOKS: '1',
    });
  });
  afterAll(async () => {
    g?.proc.kill('SIGTERM');
    await g?.exited;
    await origin?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A GET on a connection of its own: status, the serving thread, the body. */
  const get = (path: string) =>
    new Promise<{ status: number; thread: string; body: string }>((resolve, reject) => {
      http
        .get(`${g.url}${path}`, { agent: false }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            body += c;
          });
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, thread: String(res.headers['x-wakegate-thread']), body }),
          );
        })
        .on('error', reject);
    });

  it('every thread sends the same name, and a loop through either thread is refused 508', async () => {
    const names = new Set<string>();
    const threads = new Set<string>();
    for (let i = 0; i < 24; i++) {
      const r = await get(`/open/${i}`);
      expect(r.status).toBe(200);
      names.add(r.body);
      threads.add(r.thread);
    }
    expect(names.size).toBe(1);
    expect([...names][0]).toMatch(/^1\.1 wakegate-[0-9a-f]{8}$/);
    if (hasReusePort()) expect(threads.size, 'both edge threads served').toBe(2);
    for (let i = 0; i < 6; i++) {
      const r = await get(`/self/${i}`);
      expect(r.status, r.body).toBe(508);
      expect(JSON.parse(r.body).error.param).toBe('via');
    }
  });
});
