import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { GATEWAY } from '../helpers/child.js';

/** The real binary (from the sources); none of these needs a gateway. */
function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [...GATEWAY, ...args],
      { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({
          code: err ? ((err as { code?: number }).code ?? 1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        }),
    ),
  );
}

describe('keys create --offline takes the options its help lists with it, as the online command does', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-offline-opts-'));
  const env = { DATA_DIR: join(dir, 'data') };
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const create = (...more: string[]) =>
    cli(
      ['keys', 'create', '--offline', '--json', '--environment', 'production', '--scopes', 'wakes:read', ...more],
      env,
    );

  it('--rate-limit POLICY (a policy of the config by name) and --replaces KEY_ID', async () => {
    const a = await create('--label', 'limited', '--rate-limit', 'reports');
    expect(a.stderr).toBe('');
    expect(a.code).toBe(0);
    const k = JSON.parse(a.stdout);
    expect(k).toMatchObject({ label: 'limited', rate_limit: { limit: 600, burst: 600, window: 'minute' } });
    const b = await create('--label', 'successor', '--replaces', k.id);
    expect(b.stderr).toBe('');
    expect(JSON.parse(b.stdout)).toMatchObject({
      replaces: k.id,
      consumer: 'limited',
      rate_limit: { limit: 600, burst: 600, window: 'minute' },
    });
  }, 90_000);

  it('an unknown policy is refused as the API refuses it', async () => {
    const r = await create('--label', 'x', '--rate-limit', 'nope');
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      /^wakegate: 422 unprocessable: unknown rate limit policy "nope".*\(param: rate_limit\)\n$/,
    );
    expect(r.code).toBe(1);
  }, 60_000);

  it('keys --help and docs/console-and-cli.md name keys list --limit and --cursor', async () => {
    const r = await cli(['keys', '--help']);
    expect(r.stdout).toMatch(/keys list .*\[--limit 1-100\] \[--cursor C\]/s);
    const docs = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'console-and-cli.md'), 'utf8');
    expect(docs).toMatch(/keys list[^\n]*--limit/);
    expect(docs).toMatch(/keys list[^\n]*--cursor/);
  });
});
