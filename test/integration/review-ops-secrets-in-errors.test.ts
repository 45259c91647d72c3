import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wakegate } from '../helpers/cli-run.js';
import { deadPort, startServer, type TestServer } from '../helpers/origin.js';

/**
 * Secrets (ClickHouse passwords, gateway keys) must never be printed, in a log line or
 * an error message: the code itself takes care of it elsewhere (startup.ts safeUrl,
 * tracing headers "the value is not shown", log.ts masking).
 */
// Regression tests from a review of the CLI, configuration and operations (each failed before its fix).
describe('secrets in error messages', () => {
  let dir: string;
  let api: TestServer;
  let auth: string[];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-review-secrets-'));
    auth = [];
    // Answers like GET /v2/api-keys, recording the Authorization it got.
    api = await startServer((req, res) => {
      auth.push(String(req.headers.authorization));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [], has_more: false, next_cursor: null }));
    });
  });
  afterAll(async () => {
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a numeric storage.clickhouse_password in the file is not repeated in the config error', async () => {
    const file = join(dir, 'pw.yaml');
    // A wrong type (YAML reads the unquoted password as a number): the operator must quote it.
    writeFileSync(file, 'storage:\n  clickhouse_url: http://127.0.0.1:8123\n  clickhouse_password: 73519462\n');
    const r = await wakegate(['serve', '--config', file], { DATA_DIR: join(dir, 'a') });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^config: storage\.clickhouse_password: /);
    // Actual: `config: storage.clickhouse_password: must be text, not 73519462 (pw.yaml:3:3)`.
    expect(r.stderr).not.toContain('73519462');
  });

  it('a CLICKHOUSE_URL holding user:password@ never prints the password, and fails in one line', async () => {
    const port = await deadPort();
    const r = await wakegate(['serve'], {
      DATA_DIR: join(dir, 'b'),
      ORIGIN_URL: 'http://127.0.0.1:9',
      CLICKHOUSE_URL: `http://default:s3cr3tPassw0rd@127.0.0.1:${port}/`,
    });
    expect(r.code).toBe(1);
    // Actual: `... did not answer as ClickHouse (Request cannot be constructed from a URL that
    // includes credentials: http://default:s3cr3tPassw0rd@127.0.0.1:PORT/ping)`, after two
    // `[WARN][@clickhouse/client]` lines that are not the JSON log lines the docs promise.
    expect(r.stderr).not.toContain('s3cr3tPassw0rd');
    expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
  });

  it('a --key-file with a second line (pass show ...) never prints the key, nor blames the network', async () => {
    const secret = `svc_live_${'Ab3'.repeat(14)}`;
    const file = join(dir, 'key');
    // `pass show wakegate | wakegate keys list --key-file -` (docs/console-and-cli.md): pass entries
    // commonly hold the secret on the first line and notes below it.
    writeFileSync(file, `${secret}\nurl: https://gateway.example\n`);
    const r = await wakegate(['keys', 'list', '--url', api.url, '--key-file', file], {});
    // Actual: exit 1, `wakegate: cannot reach the gateway at http://127.0.0.1:PORT (Headers.append:
    // "Bearer svc_live_...\nurl: ..." is an invalid header value.); is it running? (--url)`: the
    // whole secret, on two lines, blaming a gateway that is up.
    expect(r.stderr).not.toContain(secret.slice('svc_live_'.length));
    expect(r.stderr).not.toMatch(/cannot reach the gateway/);
    expect(r.stderr.trim().split('\n').length, r.stderr).toBeLessThanOrEqual(1);
  });
});
