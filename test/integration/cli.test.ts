import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKeySecret } from '../../src/auth/secrets.js';
import { type ChildGateway, GATEWAY, spawnGateway } from '../helpers/child.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

/** Runs the real binary; resolves with its exit code and output. */
function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [...GATEWAY, ...args],
      { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 },
      (err, stdout, stderr) =>
        resolve({
          code: err ? ((err as { code?: number }).code ?? 1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        }),
    ),
  );
}

describe('the CLI, beside a running gateway', () => {
  let dir: string;
  let g: ChildGateway;
  let receiver: Receiver;
  const admin = newKeySecret('live');
  let env: Record<string, string>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-cli-'));
    receiver = await startReceiver();
    writeFileSync(
      join(dir, 'cfg.yaml'),
      'webhooks: { allow_insecure_http: true, allow_private_networks: true, retry_schedule_s: [3600] }\n',
    );
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: admin,
    });
    env = { WAKEGATE_KEY: admin, WAKEGATE_URL: g.url };
  }, 60_000);
  afterAll(async () => {
    g.proc.kill('SIGTERM');
    await g.exited;
    await receiver.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('has help on every command and a version', async () => {
    for (const args of [
      ['--help'],
      ['-h'],
      ['serve', '--help'],
      ['migrate', '--help'],
      ['keys', '--help'],
      ['keys', 'create', '-h'],
      ['endpoints', '--help'],
      ['deliveries', '--help'],
    ]) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout, args.join(' ')).toMatch(/Usage/);
    }
    const v = await cli(['--version']);
    expect(v.stdout).toMatch(/^wakegate \d+\.\d+\.\d+\n$/);
    const bad = await cli(['keys', 'list', '--bogus', 'x'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unknown option --bogus');
  });

  it('keys create, list, get and revoke through the API, as tables or --json', async () => {
    const c = await cli(
      ['keys', 'create', '--label', 'ci', '--environment', 'sandbox', '--scopes', 'wakes:read', '--json'],
      env,
    );
    expect(c.code, c.stderr).toBe(0);
    const k = JSON.parse(c.stdout);
    expect(k).toMatchObject({ label: 'ci', environment: 'sandbox', scopes: ['wakes:read'] });
    expect(k.secret).toMatch(/^svc_test_/);
    const human = await cli(
      ['keys', 'create', '--label', 'human', '--environment', 'production', '--scopes', 'wakes:read'],
      env,
    );
    expect(human.stdout).toMatch(/secret\s+svc_live_/);
    expect(human.stdout).toContain('only time the secret is shown');

    const list = await cli(['keys', 'list', '--environment', 'sandbox'], env);
    expect(list.stdout.split('\n')[0]).toMatch(/^ID\s+LABEL\s+ENVIRONMENT/);
    expect(list.stdout).toContain(k.id);
    const get = await cli(['keys', 'get', k.id, '--environment', 'sandbox'], env);
    expect(get.stdout).toMatch(new RegExp(`id\\s+${k.id}`));
    const rev = await cli(['keys', 'revoke', k.id, '--environment', 'sandbox', '--json'], env);
    expect(JSON.parse(rev.stdout).revoked_at).not.toBeNull();
    const revoked = await cli(['keys', 'list', '--environment', 'sandbox', '--status', 'revoked', '--json'], env);
    expect(JSON.parse(revoked.stdout).data.map((x: { id: string }) => x.id)).toContain(k.id);

    // An API error is one line with the error's type, message and param.
    const nope = await cli(['keys', 'get', 'key_nope'], env);
    expect(nope.code).toBe(1);
    expect(nope.stderr).toMatch(/^wakegate: 404 resource_missing: .*\n$/);
    const unauth = await cli(['keys', 'list'], { WAKEGATE_URL: g.url, WAKEGATE_KEY: newKeySecret('live') });
    expect(unauth.stderr).toContain('401 authentication_required');
  });

  it('refuses labels and consumers with terminal escapes in one line that shows none raw, and reads the key from --key-file', async () => {
    const evil = 'ok\u001b]0;pwned\u0007\u001b[2K';
    const c = await cli(
      ['keys', 'create', '--label', evil, '--consumer', evil, '--environment', 'production', '--scopes', 'wakes:read'],
      env,
    );
    // Since #34 item 5 a label or consumer with control characters is refused (400 naming
    // `label`); the CLI says so in one line, showing the escapes, never writing them raw.
    expect(c.code, c.stderr).not.toBe(0);
    expect(c.stdout + c.stderr).not.toContain('\u001b');
    expect(c.stderr.trim().split('\n')).toHaveLength(1);
    expect(c.stderr).toMatch(/label/);
    const keyFile = join(dir, 'admin.key');
    writeFileSync(keyFile, `${admin}\n`, { mode: 0o600 });
    const list = await cli(['keys', 'list', '--key-file', keyFile], { WAKEGATE_URL: g.url });
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).not.toContain('\u001b');
    const help = await cli(['keys', '--help']);
    expect(help.stdout).toContain('--key-file');
  });

  it('endpoints create, disable, enable, list; deliveries list and replay', async () => {
    const c = await cli(['endpoints', 'create', receiver.url, '--events', '*', '--json'], env);
    expect(c.code, c.stderr).toBe(0);
    const ep = JSON.parse(c.stdout);
    expect(ep.secret).toMatch(/^whsec_/);
    expect((await cli(['endpoints', 'disable', ep.id, '--json'], env)).stdout).toContain('"disabled"');
    expect((await cli(['endpoints', 'enable', ep.id, '--json'], env)).stdout).toContain('"enabled"');
    const list = await cli(['endpoints', 'list'], env);
    expect(list.stdout).toMatch(new RegExp(`${ep.id}\\s+enabled`));

    receiver.answer = (_req, res) => {
      res.statusCode = 500;
      res.end();
    };
    const t = await fetch(`${g.url}/v2/webhooks/endpoints/${ep.id}/test`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}` },
    });
    const d = await t.json();
    await until(async () => {
      const r = await cli(['deliveries', 'list', '--status', 'failed', '--json'], env);
      return r.stdout.includes(d.id);
    }, 10_000);
    receiver.answer = (_req, res) => res.end('ok');
    const replay = await cli(['deliveries', 'replay', d.id, '--json'], env);
    expect(replay.code, replay.stderr).toBe(0);
    const r = JSON.parse(replay.stdout);
    expect(r).toMatchObject({ is_replay: true, replay_of: d.id });
    await until(
      async () => (await cli(['deliveries', 'list', '--status', 'delivered'], env)).stdout.includes(r.id),
      10_000,
    );
    const table = await cli(['deliveries', 'list'], env);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+STATUS\s+EVENT_TYPE/);
  }, 30_000);

  it('migrate and keys create --offline say in one line that the store is held, and what to do', async () => {
    const denv = { DATA_DIR: join(dir, 'data') };
    const m = await cli(['migrate'], denv);
    expect(m.code).toBe(1);
    expect(m.stderr.trim().split('\n')).toHaveLength(1);
    expect(m.stderr).toMatch(/held by a running gateway/);
    const o = await cli(
      ['keys', 'create', '--offline', '--label', 'x', '--environment', 'production', '--scopes', 'wakes:read'],
      denv,
    );
    expect(o.code).toBe(1);
    expect(o.stderr.trim().split('\n')).toHaveLength(1);
    expect(o.stderr).toMatch(/held by a running gateway \(pid \d+\); create the key through its API/);
  });
});
