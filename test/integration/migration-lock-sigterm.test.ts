import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { openStore } from '../../src/store/client.js';
import { takeMigrationLock } from '../../src/store/migration-lock.js';
import type { Store } from '../../src/store/store.js';
import { GATEWAY } from '../helpers/child.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';

let storage: HttpStorage;
let other: Store;
let dir: string;
beforeAll(async () => {
  storage = await startHttpStorage();
  other = await openStore({ clickhouse_url: storage.url, clickhouse_database: 'wakegate' } as Parameters<
    typeof openStore
  >[0]);
  await other.client.command({ query: 'CREATE DATABASE IF NOT EXISTS wakegate' });
  dir = mkdtempSync(join(tmpdir(), 'review-conc-sigterm-'));
}, 60_000);
afterAll(async () => {
  await other?.close();
  await storage?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

// Another instance holds the migration lock (alive, renewing: a long migration, or
// for ever when the lock cannot be taken over). A gateway waiting for it is told
// SIGTERM (docker stop, a rolling update): it should stop; it waits for its start.
it('a gateway waiting for the migration lock stops on SIGTERM', async () => {
  const held = await takeMigrationLock(other);
  writeFileSync(
    join(dir, 'cfg.yaml'),
    `storage: { clickhouse_url: "${storage.url}", encryption_key: "${randomBytes(32).toString('base64')}" }\nlog: { level: info }\nserver: { port: 0, ops_port: 0, threads: 1 }\n`,
  );
  const proc = spawn(process.execPath, [...GATEWAY, 'serve', '--config', join(dir, 'cfg.yaml')], {
    env: { ...process.env, DATA_DIR: join(dir, 'data'), WAKEGATE_ADMIN_KEY: `svc_live_${newSecret()}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stderr?.on('data', (c) => (err += c));
  const exited = new Promise<string>((r) => proc.on('exit', (code, sig) => r(`exit ${code} ${sig}`)));
  for (let i = 0; i < 100 && !err.includes('waiting for another instance'); i++)
    await new Promise((r) => setTimeout(r, 100));
  expect(err).toContain('waiting for another instance');
  proc.kill('SIGTERM');
  const outcome = await Promise.race([
    exited,
    new Promise<string>((r) => setTimeout(() => r('still running 8 s after SIGTERM'), 8_000)),
  ]);
  console.log(outcome);
  proc.kill('SIGKILL');
  await held.release();
  expect(outcome).not.toBe('still running 8 s after SIGTERM');
}, 60_000);
