// Regression tests from a review of HTTP semantics (2026-11-27).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

// Runs on the Node LTS (bash scripts/test-on-lts.sh <this file>), where two threads share the port (on an older Node it skips).
/**
 * With edge threads, a /v2 call on the main listener is handed over to the control
 * thread by a request of the edge's own, which carries a Host of its own: a call without
 * Host, or with two Host lines, was answered as if it had one. It is refused at the edge
 * (400, `param: "host"`), as it is with one thread.
 */
describe.runIf(hasReusePort())('a /v2 call with no Host, or two, is refused on an edge thread too', () => {
  const admin = `svc_live_${newSecret()}`;
  let dir: string;
  let g: ChildGateway;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-v2-host-threads-'));
    writeFileSync(join(dir, 'cfg.yaml'), ['server: { threads: 2 }', 'log: { level: info }', ''].join('\n'));
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: admin,
    });
  }, 60_000);
  afterAll(async () => {
    if (g && g.proc.exitCode === null) {
      g.proc.kill('SIGTERM');
      await g.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it.each([
    ['no Host', ''],
    ['two Host lines', 'Host: a.example\r\nHost: b.example\r\n'],
    ['a Host that is no host[:port]', 'Host: a.example/evil\r\n'],
  ])('%s: 400 invalid_request, param host', async (_, host) => {
    const port = Number(new URL(g.url).port);
    const r = await rawExchange(
      port,
      `GET /v2/wakes HTTP/1.1\r\n${host}Authorization: Bearer ${admin}\r\nConnection: close\r\n\r\n`,
    );
    expect(statusOf(r.text), r.text).toBe(400);
    const body = JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4));
    expect(body.error).toMatchObject({ type: 'invalid_request', param: 'host' });
  });

  it('with one good Host the same call is answered', async () => {
    const port = Number(new URL(g.url).port);
    const r = await rawExchange(
      port,
      `GET /v2/wakes HTTP/1.1\r\nHost: a.example\r\nAuthorization: Bearer ${admin}\r\nConnection: close\r\n\r\n`,
    );
    expect(statusOf(r.text), r.text).toBe(200);
  });

  // (2026-11-28) An absolute-form target (RFC 9112 §3.2.2) is read as its path on whichever thread takes it.
  it('an absolute-form call, with no Host line, is answered: its authority is the Host', async () => {
    const port = Number(new URL(g.url).port);
    for (let i = 0; i < 4; i++) {
      const r = await rawExchange(
        port,
        `GET http://a.example/v2/wakes?limit=1 HTTP/1.1\r\nAuthorization: Bearer ${admin}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(r.text), r.text).toBe(200);
    }
  });
});
