import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseArgs, UsageError } from '../../src/cli/args.js';
import { apiCommand } from '../../src/cli/commands.js';
import { GATEWAY } from '../helpers/child.js';

const ROOT = realpathSync(join(import.meta.dirname, '..', '..'));

/** The real binary (from the sources), in `cwd`; none of these needs a gateway. */
function cli(
  args: string[],
  env: Record<string, string> = {},
  cwd?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [...GATEWAY, ...args],
      { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 60_000, ...(cwd ? { cwd } : {}) },
      (err, stdout, stderr) =>
        resolve({
          code: err ? ((err as { code?: number }).code ?? 1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        }),
    ),
  );
}

// A URL where nothing answers: a command that got as far as calling it would say "cannot reach".
const DOWN = { WAKEGATE_URL: 'http://127.0.0.1:9', WAKEGATE_KEY: 'svc_live_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' };

/** A command run in this process (as main.ts runs it, bar the exit code): what it printed, or what it threw. */
async function inProcess(argv: string[], env: Record<string, string> = DOWN): Promise<{ out: string; err: unknown }> {
  let out = '';
  try {
    const io = {
      out: (s: string) => {
        out += s;
      },
      env,
    };
    await apiCommand(parseArgs(argv), io);
    return { out, err: null };
  } catch (err) {
    return { out, err };
  }
}

describe('CLI usage errors are refused before any call, naming the option', () => {
  const BAD: [string[], string, Record<string, string>?][] = [
    [['wakes', 'tail', '--since', 'yesterday'], '--since "yesterday" is not a time: use ISO 8601 with a zone'],
    [['wakes', 'list', '--until', 'soon'], '--until "soon" is not a time'],
    [['wakes', 'list', '--since', '2027-02-30T00:00:00Z'], '--since "2027-02-30T00:00:00Z" is not a time'],
    [['wakes', 'list', '--since', '2026-11-22T10:00:00+24:00'], 'is not a time'],
    [['wakes', 'tail', '--until', '2026-11-22T10:00:00'], '--until "2026-11-22T10:00:00" has no time zone'],
    // Read in the machine's zone it would be another instant, and a revocation is not undone.
    [['keys', 'revoke', 'key_x', '--at', '2026-12-01T00:00:00'], '--at "2026-12-01T00:00:00" has no time zone'],
    [['keys', 'revoke', 'key_x', '--at', '2026-12-01'], '--at "2026-12-01" has no time zone'],
    [['keys', 'revoke', 'key_x', '--at', 'tomorrow'], '--at "tomorrow" is not a time'],
    // new URL('localhost:8080') parses, as scheme "localhost:": it would be reported unreachable.
    [['keys', 'list', '--url', 'localhost:8080'], '--url "localhost:8080" is not an http:// or https:// URL'],
    [
      ['keys', 'list'],
      'WAKEGATE_URL "ftp://127.0.0.1" is not an http:// or https:// URL',
      { WAKEGATE_URL: 'ftp://127.0.0.1' },
    ],
    [['keys', 'list', '--url', 'http://u:p@127.0.0.1:9'], '--url must not hold a user or password'],
    // `keys list sandbox` reads like "the sandbox keys" but would list the key's own environment.
    [['keys', 'list', 'sandbox'], 'unexpected "sandbox"'],
    [['endpoints', 'list', 'x'], 'unexpected "x"'],
    [['deliveries', 'list', 'x'], 'unexpected "x"'],
    [['keys', 'create', 'ci', '--label', 'ci', '--environment', 'production', '--scopes', 'a:read'], 'unexpected "ci"'],
  ];

  it.each(BAD)('%j: %s', async (argv, message, env) => {
    const r = await inProcess(argv, { ...DOWN, ...env });
    expect(r.err).toBeInstanceOf(UsageError);
    expect((r.err as Error).message).toContain(message);
    expect(r.out).toBe('');
  });

  it('the binary: exit 2 and one line, never "Invalid time value" or an unreachable gateway', async () => {
    const runs = await Promise.all([
      cli(['wakes', 'tail', '--since', 'yesterday'], DOWN),
      cli(['keys', 'list', '--url', 'localhost:8080'], { WAKEGATE_KEY: DOWN.WAKEGATE_KEY }),
      cli(['keys', 'list', 'sandbox'], DOWN),
    ]);
    for (const r of runs) {
      expect(r.code, r.stderr).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^wakegate: (--since "yesterday" is not a time|--url "localhost|unexpected "sandbox")/);
      expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    }
  }, 60_000);
});

describe('keys revoke --at: an instant with its zone, sent as UTC', () => {
  let server: http.Server;
  let url: string;
  const sent: unknown[] = [];
  beforeAll(async () => {
    // Stands in for the gateway: records the body of the DELETE, answers as the API does.
    server = http.createServer((req, res) => {
      let b = '';
      req.on('data', (c) => {
        b += c;
      });
      req.on('end', () => {
        sent.push(b ? JSON.parse(b) : null);
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ id: 'key_x', object: 'api_key', status: 'scheduled' }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('Z or an offset: the instant it names, whatever the machine zone', async () => {
    for (const at of ['2026-12-01T00:00:00Z', '2026-12-01T02:00:00+02:00', '2026-11-30T19:00:00.000-05:00']) {
      const r = await inProcess(['keys', 'revoke', 'key_x', '--at', at, '--json'], { ...DOWN, WAKEGATE_URL: url });
      expect(r.err).toBeNull();
    }
    expect(sent).toEqual(Array(3).fill({ revoke_at: '2026-12-01T00:00:00.000Z' }));
  });
});

describe('keys create --offline', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-offline-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses an environment the config does not have as the API does, and stores nothing', async () => {
    const data = join(dir, 'data');
    const r = await cli(
      ['keys', 'create', '--offline', '--label', 'rec', '--environment', 'staging', '--scopes', 'keys:read', '--json'],
      { DATA_DIR: data },
    );
    // It issued a key of "staging" whose secret was svc_null_...: neither of the two classes there are.
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe('wakegate: 422 unprocessable: unknown environment "staging" (param: environment)\n');
    expect(r.code).toBe(1);
    expect(existsSync(data)).toBe(false);
  }, 60_000);

  it('no secret is ever made of a class that is not live or test', async () => {
    const { newKeySecret } = await import('../../src/auth/secrets.js');
    expect(newKeySecret('test')).toMatch(/^svc_test_[0-9A-Za-z]{43}$/);
    expect(() => newKeySecret(null as never)).toThrow(/class null/);
  });
});

describe('an installed wakegate, started outside its package', () => {
  const cwd = mkdtempSync(join(tmpdir(), 'wakegate-cwd-'));
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  it("serve with no --config reads the package's config/default.yaml", async () => {
    const proc = spawn(process.execPath, [...GATEWAY, 'serve'], {
      cwd,
      env: {
        PATH: process.env.PATH ?? '',
        PORT: '0',
        OPS_PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: join(cwd, 'data'),
        ORIGIN_URL: 'http://127.0.0.1:9',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc.stdout.resume();
    let err = '';
    const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
    const line = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no start line:\n${err}`)), 45_000);
      proc.stderr.on('data', (c) => {
        err += c;
        const l = err.split('\n').find((x) => x.includes('"msg":"wakegate listening"'));
        if (l) {
          clearTimeout(timer);
          resolve(l);
        }
      });
      void exited.then((code) => reject(new Error(`exited ${code} before listening:\n${err}`)));
    });
    proc.kill('SIGTERM');
    expect(await exited).toBe(0);
    // It said "cannot read config/default.yaml: ENOENT" (a path relative to the working directory).
    expect(JSON.parse(line)).toMatchObject({
      config: join(ROOT, 'config', 'default.yaml'),
      origin: 'http://127.0.0.1:9',
    });
  }, 60_000);

  // An origin's user and password were dropped without a word (none reached the origin);
  // the start line only masked them. Such a URL is refused, in one line that shows neither.
  it('an ORIGIN_URL holding a user and password is refused in one line that shows neither', async () => {
    const r = await new Promise<{ code: number | null; err: string }>((resolve) => {
      execFile(
        process.execPath,
        [...GATEWAY, 'serve'],
        {
          cwd,
          env: {
            PATH: process.env.PATH ?? '',
            PORT: '0',
            OPS_PORT: '0',
            DATA_DIR: join(cwd, 'data-creds'),
            ORIGIN_URL: 'http://origin-user:origin-pass@127.0.0.1:9',
          },
        },
        (e, _out, err) => resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, err }),
      );
    });
    expect(r.code).toBe(1);
    expect(r.err.trim().split('\n'), r.err).toHaveLength(1);
    expect(r.err).toContain('ORIGIN_URL');
    expect(r.err).not.toMatch(/origin-user|origin-pass/);
  }, 60_000);
});
