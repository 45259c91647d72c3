import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/**
 * A regression test (found by an attack review, since fixed). What it was (upgrade-offer.ts serve()): run it on the LTS too, `bash scripts/test-on-lts.sh
 * test/integration/upgrade-offer-http10-offer-node26.test.ts` (Node 26, the version the Dockerfile ships).
 *
 * serve() replaces req.rawHeaders with a shorter array (Upgrade, HTTP2-Settings taken
 * out), then builds `new http.ServerResponse(req)` outside its try. For an HTTP/1.0
 * request Node 26's constructor reads `getRawHeader(req, 'te', true)`, which walks
 * req[kHeadersCount] entries (the parsed count, not rawHeaders.length) and reaches past
 * the end: TypeError "Cannot read properties of undefined (reading 'length')", thrown
 * in the 'upgrade' listener, uncaught. One unauthenticated request on any path ends the
 * gateway. On Node 20 the same request is served.
 */
describe('one HTTP/1.0 request with an Upgrade offer', () => {
  let origin: TestServer;
  let dir: string;
  let g: ChildGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end(`ok ${req.url}`);
    });
    dir = mkdtempSync(join(tmpdir(), 'wakegate-review-offer-'));
    const cfg = {
      server: { threads: 1 },
      routes: [{ name: 'public', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    };
    writeFileSync(join(dir, 'cfg.yaml'), JSON.stringify(cfg));
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], { DATA_DIR: join(dir, 'data') });
  }, 60_000);
  afterAll(async () => {
    g?.proc.kill('SIGKILL');
    await g?.exited;
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is served as without the offer, and the gateway serves on', async () => {
    const r = await rawExchange(
      g.port,
      'GET /open/old HTTP/1.0\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n',
      3000,
    );
    const exited = await Promise.race([g.exited, new Promise((res) => setTimeout(() => res(null), 500))]);
    console.log({ node: process.version, status: statusOf(r.text), exited });
    console.log(
      g
        .stderr()
        .split('\n')
        .filter((l) => /TypeError|at .*upgrade-offer/.test(l))
        .slice(0, 3)
        .join('\n'),
    );
    expect(exited).toBeNull();
    expect(statusOf(r.text)).toBe(200);
    expect(r.text.endsWith('ok /open/old')).toBe(true);
  });
});
