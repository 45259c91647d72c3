import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GATEWAY, spawnGateway } from '../helpers/child.js';
import { call } from '../helpers/gateway.js';
import { echoOrigin } from '../helpers/origin.js';
import { seedStore } from '../helpers/store-template.js';

// `wakegate serve > /dev/null 2>&1 &` on a first start: the bootstrap admin key was generated,
// stored, and its secret shown once, to /dev/null. No key could ever use /v2 then, and a
// restart made none (a key existed). Now none is generated while stdout is /dev/null: a warn
// line says why and what to do, and the next start that can show one makes it.
describe('a first start with stdout to /dev/null', () => {
  it('generates no key it could not show; the next start with a stdout does', async () => {
    const origin = await echoOrigin('prod');
    const d = mkdtempSync(join(tmpdir(), 'wakegate-boot-null-'));
    const env = { PATH: process.env.PATH ?? '', PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1' };
    const dataDir = join(d, 'data');
    seedStore(dataDir);
    const devNull = openSync('/dev/null', 'w');
    try {
      const proc = spawn(process.execPath, [...GATEWAY, 'serve'], {
        env: { ...env, DATA_DIR: dataDir, ORIGIN_URL: origin.url },
        stdio: ['ignore', devNull, 'pipe'],
      });
      let err = '';
      proc.stderr?.on('data', (c) => {
        err += c;
      });
      const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
      const port = await new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no start:\n${err}`)), 30_000);
        proc.stderr?.on('data', () => {
          const m = /"msg":"wakegate listening","port":(\d+)/.exec(err);
          if (m) {
            clearTimeout(timer);
            resolve(Number(m[1]));
          }
        });
      });
      const warn = err.split('\n').find((l) => l.includes('none was generated'));
      expect(warn, err).toBeDefined();
      expect(JSON.parse(warn as string)).toMatchObject({
        level: 'warn',
        fix: expect.stringContaining('WAKEGATE_ADMIN_KEY'),
      });
      expect(err).not.toContain('bootstrap admin key installed');
      proc.kill('SIGTERM');
      expect(await exited, err).toBe(0);
      expect(port).toBeGreaterThan(0);

      // A start that can show it generates it, and it works.
      const g = await spawnGateway(['serve'], { DATA_DIR: dataDir, ORIGIN_URL: origin.url });
      try {
        const deadline = Date.now() + 5_000;
        while (!g.stdout().includes('svc_live_') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        const secret = /svc_live_[A-Za-z0-9_]+/.exec(g.stdout())?.[0];
        expect(secret, g.stdout()).toBeDefined();
        expect((await call(g.url, secret as string, 'GET', '/v2/api-keys')).status).toBe(200);
      } finally {
        g.proc.kill('SIGTERM');
        await g.exited;
      }
    } finally {
      closeSync(devNull);
      await origin.close();
      rmSync(d, { recursive: true, force: true });
    }
  }, 120_000);
});
