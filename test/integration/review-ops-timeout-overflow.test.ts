import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Durations in ms are given to setTimeout, which Node clamps to 1 ms past 2^31-1
 * (about 24.8 days) with a TimeoutOverflowWarning. The schema has no upper bound on
 * them (server.drain_timeout_ms, routes[].timeout_ms, webhooks.timeout_ms, ...), so a
 * "practically forever" value turns into "at once".
 */
// Regression tests from a review of the CLI, configuration and operations (each failed before its fix).
describe('a huge duration in the config', () => {
  let dir: string;
  let origin: TestServer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-review-overflow-'));
    // Answers after 1.5 s: a request in flight when the stop comes.
    origin = await startServer((_req, res) => {
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('finished');
      }, 1500);
    });
  });
  afterAll(async () => {
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('server.drain_timeout_ms: 3000000000 lets a request in flight finish on SIGTERM (or is refused at start)', async () => {
    const file = join(dir, 'wakegate.yaml');
    writeFileSync(
      file,
      [
        'server:',
        '  threads: 1',
        '  drain_timeout_ms: 3000000000 # about 35 days: "let them all finish"',
        'routes:',
        '  - name: slow',
        '    prefix: /slow',
        '    auth: none',
        `    origins: { production: "${origin.url}" }`,
        '',
      ].join('\n'),
    );
    let g: ChildGateway;
    try {
      g = await spawnGateway(['serve', '--config', file], { DATA_DIR: join(dir, 'data') });
    } catch (e) {
      // Fixed the other way: the start refuses the value, naming it.
      expect(String(e)).toMatch(/config: server\.drain_timeout_ms: /);
      return;
    }
    const answer = fetch(`${g.url}/slow/x`).then(
      async (r) => ({ status: r.status, body: await r.text() }),
      (e: Error) => ({ status: 0, body: String((e as { cause?: Error }).cause ?? e) }),
    );
    await new Promise((r) => setTimeout(r, 300));
    g.proc.kill('SIGTERM');
    const got = await answer;
    const exit = await g.exited;
    // Actual: status 0 (the connection is cut at once: "other side closed"), and stderr holds
    // "TimeoutOverflowWarning: 3000000000 does not fit into a 32-bit signed integer.
    // Timeout duration was set to 1."
    expect(got, g.stderr()).toEqual({ status: 200, body: 'finished' });
    expect(exit.code).toBe(0);
    expect(g.stderr()).not.toContain('TimeoutOverflowWarning');
  });
});
