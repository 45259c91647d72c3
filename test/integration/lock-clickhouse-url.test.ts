import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { newSecret } from '../../src/ids.js';
import { openStore } from '../../src/store/client.js';
import { queryRows, type Store } from '../../src/store/store.js';
import { GATEWAY, spawnGateway } from '../helpers/child.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/** Runs the gateway (from its sources) until it exits; its exit code and output. */
function run(args: string[], env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [...GATEWAY, ...args],
      { env: { PATH: process.env.PATH ?? '', PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', ...env }, timeout: 30_000 },
      (err, _stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr: String(stderr) }),
    ),
  );
}

/**
 * With CLICKHOUSE_URL the write-ahead log, the buckets and secret.key are still in
 * DATA_DIR: the directory is held by the same lock as with the embedded engine. A
 * second gateway let start there took the first one's open log segment for a crash's,
 * inserted and deleted it, and the first one's next insert failed (its batch lost).
 */
describe('the data-directory lock with CLICKHOUSE_URL (child gateways)', () => {
  let storage: HttpStorage;
  let origin: TestServer;
  let dir: string;
  let store: Store;
  const admin = `svc_live_${newSecret()}`;

  beforeAll(async () => {
    storage = await startHttpStorage();
    origin = await startServer((_req, res) => res.end('ok'));
    dir = mkdtempSync(join(tmpdir(), 'wakegate-lock-ch-'));
    store = await openStore(loadConfig({ env: { DATA_DIR: join(dir, 'probe'), CLICKHOUSE_URL: storage.url } }).storage);
  }, 60_000);
  afterAll(async () => {
    await store?.close();
    await origin?.close();
    await storage?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const envFor = (name: string) => ({
    DATA_DIR: join(dir, name),
    ORIGIN_URL: origin.url,
    WAKEGATE_ADMIN_KEY: admin,
    CLICKHOUSE_URL: storage.url,
  });

  const stored = async (prefix: string) =>
    Number(
      (
        await queryRows<{ n: string }>(
          store,
          `SELECT uniqExact(id) AS n FROM ${store.db}.wakes WHERE startsWith(path, {p:String})`,
          { p: prefix },
        )
      )[0]?.n,
    );

  /** Waits (bounded) until `f` returns `want`; returns what it last returned. */
  async function settle<T>(f: () => Promise<T>, want: T, ms = 15_000): Promise<T> {
    const end = Date.now() + ms;
    let v = await f();
    while (v !== want && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 100));
      v = await f();
    }
    return v;
  }

  it('a second gateway, migrate and keys create --offline are refused in one line naming the pid; the first loses no wake', async () => {
    const env = envFor('live');
    const g1 = await spawnGateway(['serve'], env);
    const pid = g1.proc.pid as number;
    let sent = 0;
    const errors: string[] = [];
    let going = true;
    const traffic = (async () => {
      while (going && errors.length < 3) {
        try {
          const r = await fetch(`${g1.url}/live/${sent}`);
          await r.arrayBuffer();
          if (r.status === 200) sent++;
          else errors.push(`status ${r.status}`);
        } catch (e) {
          errors.push(String((e as Error).cause ?? e));
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    let second: { code: number; stderr: string };
    const offline: { code: number; stderr: string }[] = [];
    try {
      await new Promise((r) => setTimeout(r, 500));
      second = await run(['serve'], env);
      for (const args of [
        ['migrate'],
        ['keys', 'create', '--offline', '--label', 'x', '--environment', 'production', '--scopes', 'wakes:read'],
      ])
        offline.push(await run(args, env));
      // Long enough for the first gateway to seal and insert a few more batches.
      await new Promise((r) => setTimeout(r, 1000));
    } finally {
      going = false;
      await traffic;
    }
    expect(errors).toEqual([]);
    expect(second.code, second.stderr).toBe(1);
    expect(second.stderr.trim().split('\n'), second.stderr).toEqual([
      expect.stringMatching(
        new RegExp(
          `^wakegate: DATA_DIR .* is in use by the gateway with pid ${pid}: .*own DATA_DIR \\(storage\\.data_dir\\)$`,
        ),
      ),
    ]);
    for (const r of offline) {
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr.trim().split('\n'), r.stderr).toEqual([
        expect.stringMatching(new RegExp(`held by a running gateway \\(pid ${pid}\\); `)),
      ]);
    }
    // The first one still serves and stops cleanly, with every wake it answered stored once.
    expect((await fetch(`${g1.url}/live/still`)).status).toBe(200);
    sent++;
    g1.proc.kill('SIGTERM');
    expect((await g1.exited).code, g1.stderr().slice(-2000)).toBe(0);
    expect(g1.stderr()).not.toMatch(/ENOENT|"level":"error"/);
    expect(sent).toBeGreaterThan(20);
    expect(await stored('/live/')).toBe(sent);
    // Once it stopped, the directory is free again.
    const m = await run(['migrate'], env);
    expect(m.code, m.stderr).toBe(0);
  }, 120_000);

  it('a gateway SIGKILLed is started again at once on its DATA_DIR, and what it logged is stored', async () => {
    const env = envFor('kill');
    const g1 = await spawnGateway(['serve'], env);
    for (let i = 0; i < 50; i++) {
      const r = await fetch(`${g1.url}/killed/${i}`);
      await r.arrayBuffer();
      expect(r.status).toBe(200);
    }
    // In the log within 10 ms; the kill comes before the last batches are stored.
    await new Promise((r) => setTimeout(r, 60));
    g1.proc.kill('SIGKILL');
    const g2 = await spawnGateway(['serve'], env);
    try {
      expect((await g1.exited).signal).toBe('SIGKILL');
      expect((await fetch(`${g2.url}/killed/after`)).status).toBe(200);
      expect(await settle(() => stored('/killed/'), 51)).toBe(51);
    } finally {
      g2.proc.kill('SIGTERM');
      expect((await g2.exited).code).toBe(0);
    }
  }, 120_000);
});
