import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, GATEWAY, spawnGateway } from '../helpers/child.js';
import { deadPort, startServer, type TestServer } from '../helpers/origin.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where threads: auto is one edge thread per core.

/** Runs the gateway (from its sources) until it exits (a start that fails); its output. Async: the test's own servers must answer meanwhile. */
function run(env: Record<string, string>): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [...GATEWAY, 'serve'],
      { env: { PATH: process.env.PATH ?? '', PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', ...env }, timeout: 30_000 },
      (err, stdout, stderr) =>
        resolve({
          code: err ? ((err as { code?: number }).code ?? 1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        }),
    ),
  );
}

/** Issue #26, item 11: start-up says what it runs, and every failed start is one line naming the setting. */
describe('start-up, as an operator reads it', () => {
  let dir: string;
  let g: ChildGateway;
  let notClickHouse: TestServer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-start-'));
    g = await spawnGateway(['serve'], { DATA_DIR: join(dir, 'a'), ORIGIN_URL: 'http://127.0.0.1:9' });
    notClickHouse = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>not clickhouse</html>');
    });
  });
  afterAll(async () => {
    g.proc.kill('SIGTERM');
    await g.exited;
    await notClickHouse.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('one start line names the config, data directory, storage, listeners, threads and the drop-in origin', () => {
    const line = g
      .stderr()
      .split('\n')
      .find((l) => l.includes('"msg":"wakegate listening"')) as string;
    const s = JSON.parse(line);
    expect(s).toMatchObject({
      config: 'config/default.yaml',
      data_dir: join(dir, 'a'),
      storage: 'embedded',
      // threads: auto is one per core where edge threads can share the port, else 1.
      threads: hasReusePort() ? availableParallelism() : 1,
      origin: 'http://127.0.0.1:9',
    });
    expect(s.listen).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(s.console).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/console\/$/);
  });

  it.each([
    [
      'a data directory in use',
      () => ({ DATA_DIR: join(dir, 'a') }),
      /^wakegate: DATA_DIR .* is in use by the gateway with pid \d+.*DATA_DIR/,
    ],
    [
      'an unreachable CLICKHOUSE_URL',
      async () => ({ DATA_DIR: join(dir, 'b'), CLICKHOUSE_URL: `http://127.0.0.1:${await deadPort()}` }),
      /^wakegate: CLICKHOUSE_URL http:\/\/127\.0\.0\.1:\d+ cannot be reached \(ECONNREFUSED\)/,
    ],
    [
      'a CLICKHOUSE_URL that is not ClickHouse',
      () => ({ DATA_DIR: join(dir, 'c'), CLICKHOUSE_URL: notClickHouse.url }),
      /^wakegate: CLICKHOUSE_URL http:\/\/127\.0\.0\.1:\d+ did not answer as ClickHouse/,
    ],
    [
      'ORIGIN_URL that is not a URL',
      () => ({ DATA_DIR: join(dir, 'd'), ORIGIN_URL: 'not-a-url' }),
      /^config: routes\[0\]\.origins\.production: .*\(set by ORIGIN_URL\)$/,
    ],
  ])('%s: one line naming the setting', async (_name, env, line) => {
    const r = await run({ ...(await env()) });
    expect(r.code).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(line);
  });

  it('a port in use: one line naming PORT', async () => {
    const held = net.createServer();
    await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
    const port = (held.address() as net.AddressInfo).port;
    const r = await run({ DATA_DIR: join(dir, 'e'), PORT: String(port), ORIGIN_URL: 'http://127.0.0.1:9' });
    held.close();
    expect(r.code).toBe(1);
    const lines = r.stderr
      .trim()
      .split('\n')
      .filter((l) => !l.includes('"level":"info"'));
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^wakegate: PORT ${port} is in use \\(server\\.port\\)`));
    // Said before the store is opened and migrated (which takes a while on a loaded machine).
    expect(existsSync(join(dir, 'e', 'clickhouse'))).toBe(false);
  });

  it('an ops port in use: one line naming OPS_PORT, before the store is opened', async () => {
    const held = net.createServer();
    await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
    const port = (held.address() as net.AddressInfo).port;
    const r = await run({ DATA_DIR: join(dir, 'f'), OPS_PORT: String(port), ORIGIN_URL: 'http://127.0.0.1:9' });
    held.close();
    expect(r.code).toBe(1);
    const lines = r.stderr
      .trim()
      .split('\n')
      .filter((l) => !l.includes('"level":"info"'));
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^wakegate: OPS_PORT ${port} is in use \\(server\\.ops_port\\)`));
    expect(existsSync(join(dir, 'f', 'clickhouse'))).toBe(false);
  });
});
