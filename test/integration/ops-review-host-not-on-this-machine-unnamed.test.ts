// Regression tests from a review of the operator's second day (2026-11-28).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY } from '../helpers/child.js';
import { seedStore } from '../helpers/store-template.js';

/**
 * docs/operations.md: "a start that cannot go on (a data directory in use, storage
 * unreachable or not ClickHouse, a port in use, a bad setting) exits 1 with one line
 * naming the setting to change". A config copied from another machine (or a container's
 * address) in HOST / server.host or OPS_HOST / server.ops_host is such a start: the line
 * it gets today is Node's own `wakegate: listen EADDRNOTAVAIL: address not available
 * 192.0.2.1`, identical whichever of the two is wrong, and only after the store was
 * opened and migrated. src/startup.ts listenError knows EADDRINUSE and EACCES only.
 */
function run(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [...GATEWAY, 'serve'],
      {
        env: { PATH: process.env.PATH ?? '', PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', ...env },
        timeout: 60_000,
      },
      (err, _stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr: String(stderr) }),
    ),
  );
}

// 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine.
const ELSEWHERE = '192.0.2.1';

describe('a listen address this machine does not have', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-host-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each([
    ['HOST', 'server.host', { HOST: ELSEWHERE }],
    ['OPS_HOST', 'server.ops_host', { OPS_HOST: ELSEWHERE }],
  ])(
    '%s: exit 1, one line naming %s',
    async (variable, setting, env) => {
      const data = join(dir, variable);
      seedStore(data);
      const r = await run({ DATA_DIR: data, ORIGIN_URL: 'http://127.0.0.1:9', ...env });
      expect(r.code).toBe(1);
      const lines = r.stderr
        .trim()
        .split('\n')
        .filter((l) => !l.includes('"level":"info"'));
      expect(lines, r.stderr).toHaveLength(1);
      // Says which setting to change (the variable or the key), as a port in use does.
      expect(lines[0]).toMatch(
        new RegExp(`\\b${variable}\\b.*${ELSEWHERE.replaceAll('.', '\\.')}|${setting.replace('.', '\\.')}`),
      );
    },
    90_000,
  );
});
