import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where the child gateway serves with an edge thread per core.

/**
 * Issue #36: a rare SIGSEGV at SIGTERM under load. The embedded engine was closed,
 * and the process ended, while queries (a poll, an API read) were still running in
 * it; 2 stops in 15 crashed on the build before the fix. Storage now refuses new
 * calls at close, waits for the running ones and for the engine's own teardown
 * before the process ends. Each round stops a loaded gateway at a random moment.
 */
describe('SIGTERM under load, again and again', () => {
  let origin: TestServer;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('{"ok":true}'));
    });
  });
  afterAll(async () => {
    await origin.close();
  });

  it('exits 0 every time, never by a signal', async () => {
    const rounds: { code: number | null; signal: string | null; answered: number }[] = [];
    for (let round = 0; round < 6; round++) {
      const dir = mkdtempSync(join(tmpdir(), 'wakegate-stop-'));
      const admin = `svc_live_${newSecret()}`;
      const g = await spawnGateway(['serve'], { DATA_DIR: dir, ORIGIN_URL: origin.url, WAKEGATE_ADMIN_KEY: admin });
      const agent = new http.Agent({ keepAlive: true, maxSockets: 12 });
      let stop = false;
      let answered = 0;
      const get = (path: string) =>
        new Promise<void>((done) => {
          const r = http.get(
            { host: '127.0.0.1', port: g.port, path, agent, headers: { authorization: `Bearer ${admin}` } },
            (res) => {
              res.resume();
              res.on('end', () => {
                answered++;
                done();
              });
            },
          );
          r.on('error', () => done());
        });
      // Proxied requests (wakes to insert) and /v2 reads (queries in the engine) at once.
      const worker = async (k: number) => {
        for (let i = 0; !stop && i < 5000; i++) await get(k % 3 === 0 ? '/v2/wakes?limit=100' : `/x/${k}/${i}`);
      };
      const workers = Array.from({ length: 12 }, (_, k) => worker(k));
      // Under load first (some answers in: on a busy host the first ones can take a while,
      // bounded), then a random moment of it.
      for (let i = 0; i < 200 && answered <= 20; i++) await new Promise((r) => setTimeout(r, 25));
      await new Promise((r) => setTimeout(r, Math.random() * 900));
      g.proc.kill('SIGTERM');
      const { code, signal } = await g.exited;
      stop = true;
      await Promise.all(workers);
      agent.destroy();
      rounds.push({ code, signal, answered });
      rmSync(dir, { recursive: true, force: true });
      if (code !== 0) break;
    }
    expect(
      rounds.every((r) => r.code === 0 && r.signal === null),
      JSON.stringify(rounds),
    ).toBe(true);
    expect(
      rounds.every((r) => r.answered > 20),
      JSON.stringify(rounds),
    ).toBe(true);
  }, 240_000);
});
