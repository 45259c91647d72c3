// Regression tests from a review of the operator's second day (2026-11-28).

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { GATEWAY } from '../helpers/child.js';

/**
 * An operator moving the ops listener (OPS_PORT) to the port the load balancer already
 * sends to, or the reverse, gets PORT == OPS_PORT. docs/configuration.md: a bad
 * configuration stops the start listing the problem with its key path; the checks
 * across keys (src/config/loader.ts crossCheck) have no "server.port and
 * server.ops_port are the same". Each port is probed alone (src/startup.ts portFree,
 * both free), the store is opened and migrated, and then the second listener's
 * EADDRINUSE is reported as `PORT <n> is in use (server.port): stop what holds it`:
 * what holds it is this gateway's own ops listener, which is gone by the time the
 * operator looks (`ss -ltnp` shows nothing).
 */
const freePort = async (): Promise<number> => {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
};

describe('server.port and server.ops_port the same', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-sameport-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is a config error naming both keys (as every rule across keys is)', () => {
    expect(() => loadConfig({ env: { PORT: '18080', OPS_PORT: '18080' } })).toThrow(/ops_port|OPS_PORT/);
    // One port on two addresses of this machine is two listeners; 0 is a free port each.
    expect(() =>
      loadConfig({ env: { PORT: '18080', OPS_PORT: '18080', HOST: '127.0.0.2', OPS_HOST: '127.0.0.1' } }),
    ).not.toThrow();
    expect(() => loadConfig({ env: { PORT: '0', OPS_PORT: '0' } })).not.toThrow();
  });

  it('the start says so in one line naming both settings, before the store is opened', async () => {
    const port = await freePort();
    const data = join(dir, 'a');
    // SIGKILL at 45 s: such a start can hang on its way out (failed-listen-leaves-start-open.test.ts).
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const p = spawn(process.execPath, [...GATEWAY, 'serve'], {
        env: {
          PATH: process.env.PATH ?? '',
          HOST: '127.0.0.1',
          DATA_DIR: data,
          PORT: String(port),
          OPS_PORT: String(port),
          ORIGIN_URL: 'http://127.0.0.1:9',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      p.stderr?.on('data', (c) => {
        stderr += c;
      });
      const timer = setTimeout(() => p.kill('SIGKILL'), 45_000);
      p.on('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, stderr });
      });
    });
    expect(r.code).toBe(1);
    const lines = r.stderr
      .trim()
      .split('\n')
      .filter((l) => !l.includes('"level":"info"'));
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/OPS_PORT|ops_port/);
    expect(lines[0]).toMatch(/\bPORT\b|server\.port/);
    expect(existsSync(join(data, 'clickhouse')), 'the store was opened and migrated first').toBe(false);
  }, 90_000);
});
