// Regression tests from a review of the 2026-11-28 session's changes (each failed before its fix).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { newKeySecret } from '../../src/auth/secrets.js';
import { GATEWAY, spawnGateway } from '../helpers/child.js';
import { call } from '../helpers/gateway.js';
import { echoOrigin } from '../helpers/origin.js';
import { seedStore } from '../helpers/store-template.js';

// A first start whose stdout is a pipe nobody reads (`wakegate serve | head -0`, a log
// shipper that died): the bootstrap admin key was generated and stored, its one print failed
// later with EPIPE, and the warn line said only that it was not shown. The print is now
// written at once, and its failure says how to get an admin key: WAKEGATE_ADMIN_KEY, which
// replaces the unseen one on the next start.
describe('a first start whose stdout is a pipe nobody reads', () => {
  it('says how to get an admin key, and WAKEGATE_ADMIN_KEY on the next start gives one', async () => {
    const origin = await echoOrigin('prod');
    const d = mkdtempSync(join(tmpdir(), 'wakegate-boot-pipe-'));
    const dataDir = join(d, 'data');
    seedStore(dataDir);
    const env = { PATH: process.env.PATH ?? '', PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1' };
    try {
      const proc = spawn(process.execPath, [...GATEWAY, 'serve'], {
        env: { ...env, DATA_DIR: dataDir, ORIGIN_URL: origin.url },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      // The reader goes away before anything is printed.
      proc.stdout?.destroy();
      let err = '';
      proc.stderr?.on('data', (c) => {
        err += c;
      });
      const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no start:\n${err}`)), 30_000);
        proc.stderr?.on('data', () => {
          if (err.includes('"msg":"wakegate listening"')) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      await new Promise((r) => setTimeout(r, 300));
      proc.kill('SIGTERM');
      await exited;
      const warn = err.split('\n').find((l) => l.includes('could not be shown'));
      expect(warn, err).toBeDefined();
      expect(JSON.parse(warn as string)).toMatchObject({
        level: 'warn',
        fix: expect.stringContaining('WAKEGATE_ADMIN_KEY'),
      });
      expect(err).not.toMatch(/svc_live_[A-Za-z0-9_]{20,}/);

      const admin = newKeySecret('live');
      const g = await spawnGateway(['serve'], { DATA_DIR: dataDir, ORIGIN_URL: origin.url, WAKEGATE_ADMIN_KEY: admin });
      try {
        expect((await call(g.url, admin, 'GET', '/v2/api-keys')).status).toBe(200);
        expect(g.stderr()).toContain('bootstrap admin key rotated');
      } finally {
        g.proc.kill('SIGTERM');
        await g.exited;
      }
    } finally {
      await origin.close();
      rmSync(d, { recursive: true, force: true });
    }
  }, 120_000);
});
