import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { GATEWAY } from '../helpers/child.js';

/** Issue #36: a misspelt or missing key, as an operator starting the gateway meets it. */
describe('a bad config file stops the start with every problem, each located', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-cfg-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('lists each problem in one plain line with file, line and column, and exits 1', async () => {
    const file = join(dir, 'gateway.yaml');
    writeFileSync(
      file,
      ['server:', '  prot: 8080', 'routes:', '  - name: api', '    prefix: /api', '    auth: none', ''].join('\n'),
    );
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        [...GATEWAY, 'serve', '--config', file],
        { env: { PATH: process.env.PATH ?? '', DATA_DIR: join(dir, 'data') }, timeout: 30_000 },
        (err, _out, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr: String(stderr) }),
      ),
    );
    expect(r.code).toBe(1);
    expect(r.stderr.trimEnd().split('\n')).toEqual([
      `config: server.prot: is not a known setting (did you mean "port"?) (${file}:2:3)`,
      `config: routes[0].origins: is required (${file}:4:5)`,
    ]);
  });
});
