import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wakegate } from '../helpers/cli-run.js';
import { deadPort, startServer, type TestServer } from '../helpers/origin.js';

/**
 * `wakegate migrate` and `keys create --offline` open the store directly. DESIGN "Running
 * it": an unreachable CLICKHOUSE_URL, or something that is not ClickHouse there, is one
 * line naming the setting to change, never a raw client error; `serve` says so
 * (test/integration/startup.test.ts), these two commands do not.
 */
// Regression tests from a review of the CLI, configuration and operations (each failed before its fix).
describe('the commands that open the store directly, against a bad CLICKHOUSE_URL', () => {
  let dir: string;
  let notClickHouse: TestServer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-review-direct-'));
    // An ordinary web app answering 200 with JSON to anything (a wrong port, a proxy).
    notClickHouse = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}\n');
      });
    });
  });
  afterAll(async () => {
    await notClickHouse.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const OFFLINE = ['keys', 'create', '--offline', '--label', 'rescue', '--environment', 'production'];
  const commands: [string, string[]][] = [
    ['migrate', ['migrate']],
    ['keys create --offline', [...OFFLINE, '--scopes', 'keys:write']],
  ];

  it.each(commands)('%s against a server that is not ClickHouse names CLICKHOUSE_URL', async (name, args) => {
    const r = await wakegate(args, { DATA_DIR: join(dir, `n-${name.length}`), CLICKHOUSE_URL: notClickHouse.url });
    expect(r.code).toBe(1);
    // Actual: `wakegate: the migration lock was taken over by another instance`: there is no
    // other instance, and nothing says the URL is not a ClickHouse server.
    expect(r.stderr.trim()).toMatch(/^wakegate: CLICKHOUSE_URL .*did not answer as ClickHouse/);
  });

  it.each(commands)('%s against an unreachable CLICKHOUSE_URL names it', async (name, args) => {
    const port = await deadPort();
    const r = await wakegate(args, {
      DATA_DIR: join(dir, `u-${name.length}`),
      CLICKHOUSE_URL: `http://127.0.0.1:${port}`,
    });
    expect(r.code).toBe(1);
    // Actual: `wakegate: connect ECONNREFUSED 127.0.0.1:PORT`, naming no setting.
    expect(r.stderr.trim()).toMatch(/^wakegate: CLICKHOUSE_URL http:\/\/127\.0\.0\.1:\d+ cannot be reached/);
  });
});

describe('keys create --offline takes create’s options as the online command does', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-review-offline-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('--scopes with a trailing comma is read as the online command reads it', async () => {
    // Online, `--scopes wakes:read,` is the list [wakes:read] (commands.ts csv drops empty
    // items). docs/console-and-cli.md: --offline "takes create's options ..., refuses what the API would".
    const r = await wakegate(
      ['keys', 'create', '--offline', '--label', 'rescue', '--environment', 'production', '--scopes', 'wakes:read,'],
      { DATA_DIR: join(dir, 'data') },
    );
    // Actual: exit 1, `wakegate: 422 unprocessable: unknown scope "" (param: scopes[1])`.
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/scopes\s+\["wakes:read"\]/);
  });
});

describe('options a command does not take', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-review-options-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('migrate --url is refused (exit 2), not ignored while the local store is migrated', async () => {
    // docs/console-and-cli.md "Options": an option the command does not know is one line on
    // stderr and exit code 2. `wakegate migrate --help` names --config only; an operator who
    // adds --url expects the gateway there to be migrated.
    const r = await wakegate(['migrate', '--url', 'http://gateway.internal:8080'], { DATA_DIR: join(dir, 'data') });
    // Actual: exit 0, `migrations applied: 1, 2, ...` on the local DATA_DIR (run.ts main():
    // onlyFlags(args, []) still lets through args.ts COMMON: url, key, key-file, json).
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^wakegate: unknown option --url/);
  });
});
