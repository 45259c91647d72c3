import { execFile, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY } from '../helpers/child.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

/** Runs the real CLI (src/main.ts) as a child; resolves with its exit code and output. */
function cli(args: string[], env: Record<string, string>) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
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

const lines = (s: string) => s.trimEnd().split('\n');

/**
 * Issue #36, Operating it: `wakegate wakes list|show|tail` and `wakegate replay`,
 * run as the real binary against a real gateway proxying to a real origin.
 */
describe('the CLI reads wakes and replays them', () => {
  let origin: TestServer;
  let t: TestGateway;
  let app: string;
  let env: Record<string, string>;
  let price = 10;

  /** A proxied request by the app's key; the wake's id. */
  const send = async (path: string): Promise<string> => {
    const r = await fetch(`${t.url}${path}`, { headers: bearer(app) });
    await r.arrayBuffer();
    return r.headers.get('x-wake-id') as string;
  };

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname === '/api/missing') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error":"no such thing"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'x-origin-version': String(price) });
      res.end(JSON.stringify({ id: 1, name: 'widget', price }));
    });
    t = await startGateway({
      routes: [
        {
          name: 'api',
          prefix: '/api',
          scopes: { read: 'pay:read', write: 'pay:write' },
          origins: { production: origin.url },
        },
      ],
    });
    const create = async (label: string, scopes: string[], consumer?: string) =>
      (
        await t.gw.keys.create(
          { label, environment: 'production', scopes, ...(consumer ? { consumer } : {}) },
          'production',
        )
      ).secret;
    app = await create('app', ['pay:read', 'pay:write'], 'billing');
    // The operator's key: reads and replays wakes, and may send what it replays.
    env = {
      WAKEGATE_URL: t.url,
      WAKEGATE_KEY: await create('ops', ['wakes:read', 'wakes:write', 'pay:read', 'pay:write']),
    };
  }, 60_000);
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('wakes list: the filters of GET /v2/wakes, in either spelling, as a table or --json; wakes show: the exchange', async () => {
    const ok = await send('/api/item');
    const missing = await send('/api/missing');
    await flushed(t.gw);

    const byStatus = await cli(['wakes', 'list', '--route', 'api', '--status=404', '--json'], env);
    expect(byStatus.code, byStatus.stderr).toBe(0);
    expect(JSON.parse(byStatus.stdout).data.map((w: { id: string }) => w.id)).toEqual([missing]);

    const table = await cli(
      ['wakes', 'list', '--path=/api/{thing}', '--consumer', 'billing', '--status-class', '2xx', '--method=get'],
      env,
    );
    expect(table.code, table.stderr).toBe(0);
    expect(lines(table.stdout)[0]).toMatch(
      /^CAPTURED_AT\s+ID\s+METHOD\s+STATUS\s+LATENCY_MS\s+ROUTE\s+CONSUMER\s+PATH$/,
    );
    expect(lines(table.stdout).slice(1)).toEqual([
      expect.stringMatching(new RegExp(`${ok}\\s+GET\\s+200\\s+\\d+\\s+api\\s+billing\\s+/api/item$`)),
    ]);

    const slow = await cli(['wakes', 'list', '--route', 'api', '--min-latency-ms', '600000', '--json'], env);
    expect(JSON.parse(slow.stdout).data).toEqual([]);
    const keyed = await cli(
      ['wakes', 'list', '--key-id', 'key_nope', '--since', '2020-01-01T00:00:00Z', '--json'],
      env,
    );
    expect(JSON.parse(keyed.stdout).data).toEqual([]);
    const paged = await cli(['wakes', 'list', '--route', 'api', '--limit', '1'], env);
    expect(paged.stdout).toMatch(/\(more: --cursor \S+\)\n$/);
    const cursor = /--cursor (\S+)\)/.exec(paged.stdout)?.[1] as string;
    const next = await cli(['wakes', 'list', '--route', 'api', '--limit', '1', `--cursor=${cursor}`, '--json'], env);
    expect(JSON.parse(next.stdout).data[0].id).toBe(ok);
    // The API's own refusal is one line.
    const bad = await cli(['wakes', 'list', '--status', '404', '--status-class', '4xx'], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^wakegate: 400 invalid_request: status_class: cannot be combined with status .*\n$/);

    const show = await cli(['wakes', 'show', ok], env);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toMatch(new RegExp(`^id\\s+${ok}$`, 'm'));
    expect(show.stdout).toContain('\nRequest\n  GET /api/item\n');
    expect(show.stdout).toMatch(/\nResponse\n {2}200\n(.*\n)* {2}content-type: application\/json\n/);
    expect(show.stdout).toContain('{"id":1,"name":"widget","price":10}');
    const json = JSON.parse((await cli(['wakes', 'show', ok, '--json'], env)).stdout);
    expect(json.response.headers).toContainEqual(['content-type', 'application/json']);
    expect(json.request).toMatchObject({ query: '', body_bytes: 0 });
  }, 120_000);

  it('wakes tail prints a wake made after it started, once, and stops at --max', async () => {
    await send('/api/item');
    await flushed(t.gw);
    const child = spawn(
      process.execPath,
      [...GATEWAY, 'wakes', 'tail', '--route', 'api', '--json', '--max', '1', '--interval-ms', '200'],
      { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => {
      stdout += c;
    });
    child.stderr.on('data', (c) => {
      stderr += c;
    });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    try {
      await until(() => stderr.includes('tailing wakes'), 30_000, 'the tail to start');
      const made = await send('/api/item?after=start');
      await flushed(t.gw);
      expect(await exited).toBe(0);
      const printed = lines(stdout).map((l) => JSON.parse(l));
      expect(printed).toHaveLength(1);
      expect(printed[0]).toMatchObject({ id: made, route: 'api', path: '/api/item' });
    } finally {
      clearTimeout(killer);
      child.kill('SIGKILL');
    }
  }, 90_000);

  it('replay prints the diff: changed paths when the answer changed, identical when it did not', async () => {
    price = 10;
    const before = await send('/api/item');
    await flushed(t.gw);
    price = 12;
    const r = await cli(['replay', before], env);
    expect(r.code, r.stderr).toBe(0);
    expect(lines(r.stdout)[0]).toMatch(/^replay wk_\S+ of wk_\S+: 200 \(\d+ ms\)$/);
    expect(r.stdout).toContain('changed:\n');
    expect(r.stdout).toContain('  header  x-origin-version: "10" -> "12"\n');
    expect(r.stdout).toContain('  body    $.price: 10 -> 12\n');

    const again = await cli(['replay', before, '--ignore', '$.price', '--ignore=x-origin-version', '--json'], env);
    expect(again.code, again.stderr).toBe(0);
    const j = JSON.parse(again.stdout);
    expect(j).toMatchObject({ object: 'replay', wake_id: before, status: 'finished' });
    expect(j.diff).toMatchObject({ identical: true, body: [], headers: [] });

    const same = await send('/api/item');
    await flushed(t.gw);
    const identical = await cli(['replay', same], env);
    expect(identical.stdout).toContain('identical: the origin answered as it did the first time\n');
  }, 120_000);

  it('replay of a wake holding redacted values: the 409 asking for set is one line, then --set replays it', async () => {
    const w = await send('/api/item?token=tok_live_secret&n=1');
    await flushed(t.gw);
    const refused = await cli(['replay', w], env);
    expect(refused.code).toBe(1);
    expect(lines(refused.stderr)).toEqual([
      expect.stringMatching(
        /^wakegate: 409 conflict: the request holds redacted values at token; .*give each with --set NAME=VALUE \(param: set\)( \[wake wk_\w+\])?$/,
      ),
    ]);
    expect(refused.stderr).not.toContain('tok_live_secret');
    const ok = await cli(['replay', w, '--set', 'token=tok_live_other'], env);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^replay wk_\S+ of /);
    // A POST is replayed only with --allow-unsafe; the 422 says so in one line.
    const post = await fetch(`${t.url}/api/item`, { method: 'POST', headers: bearer(app), body: 'x' });
    await post.arrayBuffer();
    await flushed(t.gw);
    const id = post.headers.get('x-wake-id') as string;
    const unsafe = await cli(['replay', id], env);
    expect(unsafe.code).toBe(1);
    expect(lines(unsafe.stderr)).toEqual([
      expect.stringMatching(
        /^wakegate: 422 unprocessable: POST is not a safe method.*; with the CLI: --allow-unsafe \(param: allow_unsafe\)/,
      ),
    ]);
    expect((await cli(['replay', id, '--allow-unsafe'], env)).code).toBe(0);
    const unknown = await cli(['replay', w, '--set', 'token=a', '--set', 'nope=1'], env);
    expect(unknown.code).toBe(1);
    expect(lines(unknown.stderr)).toEqual([expect.stringMatching(/^wakegate: 400 invalid_request: .*set\.nope/)]);
  }, 120_000);
});
