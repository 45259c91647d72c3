import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { openStore } from '../../src/store/client.js';
import { queryRows } from '../../src/store/store.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where two threads share the port (on an older Node these tests skip).

/**
 * A route's detail rate (capture.detail.max_per_second) is the instance's, however many
 * edge threads serve it: each thread kept the whole rate, so two threads stored detail
 * for twice the configured exchanges a second (found by a review of the docs).
 */
const PER_SECOND = 20;
let origin: TestServer;
let dir: string;
let g: ChildGateway | null = null;

beforeAll(async () => {
  origin = await startServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('{"ok":true}'));
  });
  dir = mkdtempSync(join(tmpdir(), 'wakegate-capture-share-'));
  writeFileSync(
    join(dir, 'cfg.yaml'),
    [
      'server: { threads: 2 }',
      'capture: { flush_interval_ms: 50 }',
      'environments:',
      '  production: { class: live }',
      'rate_limits:',
      '  default: { limit: 1000000000, burst: 1000000000, window: minute }',
      'routes:',
      `  - { name: free, prefix: /free, auth: none, origins: { production: ${origin.url} }, capture: { detail: { max_per_second: ${PER_SECOND} } } }`,
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  g?.proc.kill('SIGKILL');
  await origin.close();
  rmSync(dir, { recursive: true, force: true });
});

describe.runIf(hasReusePort())('capture bounds with two edge threads', () => {
  it("a route's detail rate is the instance's, not each thread's", async () => {
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: `svc_live_${newSecret()}`,
      WAKEGATE_TEST_HOOKS: '1',
    });
    const threads = new Set<string | null>();
    let next = 0;
    const total = 200;
    const t0 = performance.now();
    // Each request on a connection of its own, 20 at a time: the kernel spreads them over both threads.
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        for (let i = next++; i < total; i = next++) {
          const r = await fetch(`${g?.url}/free/${i}`, { headers: { connection: 'close' } });
          await r.text();
          expect(r.status).toBe(200);
          threads.add(r.headers.get('x-wakegate-thread'));
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    expect(threads.size).toBe(2);
    g.proc.kill('SIGTERM');
    expect((await g.exited).code, g.stderr()).toBe(0);
    g = null;

    const store = await openStore(loadConfig({ env: { DATA_DIR: join(dir, 'data') } }).storage);
    try {
      const [row] = await queryRows<{ wakes: string; detailed: string }>(
        store,
        `SELECT (SELECT count() FROM ${store.db}.wakes WHERE route = 'free') AS wakes,
          (SELECT count() FROM ${store.db}.wake_details WHERE id IN (SELECT id FROM ${store.db}.wakes WHERE route = 'free')) AS detailed`,
      );
      expect(Number(row?.wakes)).toBe(total);
      // A bucket of PER_SECOND, refilled at PER_SECOND a second while the load ran (one more for rounding).
      const allowed = PER_SECOND + PER_SECOND * seconds + 1;
      expect(Number(row?.detailed)).toBeGreaterThan(0);
      expect(Number(row?.detailed)).toBeLessThanOrEqual(allowed);
    } finally {
      await store.close();
    }
  });
});
