// Regression tests from a review of rate limits and buckets (2026-11-27): attacks that held.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { bearer } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Runs on the Node LTS (bash scripts/test-on-lts.sh <this file>), where two threads share the port (on an older Node it skips).
// Held (review, rate limiting): per-address `unauthenticated` buckets and a key's bucket spent through /v2
// are exact across two edge threads (DESIGN: "key buckets, the shared sandbox bucket and per-address buckets alike").

let origin: TestServer;
beforeAll(async () => {
  origin = await startServer((req, res) => {
    req.resume();
    res.end('ok');
  });
});
afterAll(async () => {
  await origin.close();
});

describe.runIf(hasReusePort())('held: buckets exact across two edge threads', () => {
  const admin = `svc_live_${newSecret()}`;
  let dir: string;
  let g: ChildGateway;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-rl-threads-'));
    writeFileSync(
      join(dir, 'cfg.yaml'),
      [
        'server: { threads: 2 }',
        'log: { level: info }',
        'rate_limits:',
        '  default: { limit: 1, burst: 7, window: day }',
        '  sandbox: { limit: 1200, burst: 1200, window: minute, shared: true }',
        '  unauthenticated: { limit: 1, burst: 9, window: day }',
        'routes:',
        `  - { name: api, prefix: /api, scopes: { read: api:read, write: api:write }, origins: { production: ${origin.url} } }`,
        '',
      ].join('\n'),
    );
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: admin,
      WAKEGATE_TEST_HOOKS: '1',
    });
  }, 60_000);
  afterAll(async () => {
    if (g && g.proc.exitCode === null) {
      g.proc.kill('SIGTERM');
      await g.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  const status = (path: string, headers: Record<string, string>) =>
    fetch(`${g.url}${path}`, { headers: { ...headers, connection: 'close' } }).then(async (r) => {
      await r.arrayBuffer();
      return { status: r.status, thread: r.headers.get('x-wakegate-thread') };
    });

  it('40 bad-key requests at once, half proxied and half /v2, one per connection: exactly 9 are 401', async () => {
    const rs = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        status(i % 2 ? '/api/x' : '/v2/wakes', { authorization: `Bearer svc_live_${'b'.repeat(42)}${i % 10}` }),
      ),
    );
    expect(rs.filter((r) => r.status === 401)).toHaveLength(9);
    expect(rs.filter((r) => r.status === 429)).toHaveLength(31);
    expect(new Set(rs.map((r) => r.thread)).size).toBe(2);
  });

  it('a key held to default (burst 7) spending through /v2 and the proxy at once: exactly 7 admitted', async () => {
    const made = await fetch(`${g.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(admin), 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'both', environment: 'production', scopes: ['api:read', 'wakes:read'] }),
    });
    expect(made.status).toBe(201);
    const { secret } = (await made.json()) as { secret: string };
    const rs = await Promise.all(
      Array.from({ length: 30 }, (_, i) => status(i % 2 ? '/api/y' : '/v2/environments', bearer(secret))),
    );
    expect(rs.filter((r) => r.status === 200)).toHaveLength(7);
    expect(rs.filter((r) => r.status === 429)).toHaveLength(23);
  });
});
