// Regression tests from a review of the CLI (2026-11-28): wakes tail while the gateway restarts.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY } from '../helpers/child.js';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

/**
 * `wakes tail` "prints each new wake once, oldest first, until Ctrl-C or --max N" (its
 * help, docs/console-and-cli.md). The gateway is restarted on a deploy, a config change
 * or a SIGTERM from the orchestrator; for the second or two it is down, a poll fails with
 * ECONNREFUSED (or a 503 while it drains) and wakesTail lets the error end the command:
 * `wakegate: cannot reach the gateway ...`, exit 1. The operator who left a tail running
 * to watch the deploy loses it at the very moment they wanted to watch, and the wakes of
 * the new process are never printed. A poll that fails should be said on stderr and
 * retried (tail -F, kubectl get -w reconnect), the tail going on once the gateway is back.
 */
describe('wakes tail goes on across a gateway restart', () => {
  let origin: TestServer;
  let t: TestGateway;
  const routes = [{ name: 'app', prefix: '/app', auth: 'none', origins: {} as Record<string, string> }];
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end('ok');
    });
    routes[0]!.origins = { production: origin.url };
    t = await startGateway({ routes });
  }, 60_000);
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('prints a wake of the restarted gateway', async () => {
    const child = spawn(
      process.execPath,
      [...GATEWAY, 'wakes', 'tail', '--route', 'app', '--json', '--max', '2', '--interval-ms', '200'],
      {
        env: { PATH: process.env.PATH ?? '', WAKEGATE_URL: t.url, WAKEGATE_KEY: t.admin },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
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
    const send = async () => {
      const r = await fetch(`${t.url}/app/order`);
      await r.arrayBuffer();
      await flushed(t.gw);
      return r.headers.get('x-wake-id') as string;
    };
    try {
      await until(() => stderr.includes('tailing wakes'), 30_000, 'the tail to start');
      const before = await send();
      await until(() => stdout.includes(before), 10_000, 'the first wake');
      // The restart: the same data directory, key and port; down for about a second.
      const port = Number(new URL(t.url).port);
      await t.stop();
      await new Promise((r) => setTimeout(r, 1000));
      t = await startGateway({ routes, server: { port } }, { dir: t.dir, admin: t.admin });
      const after = await send();
      await until(() => stdout.includes(after) || child.exitCode !== null, 10_000, 'the wake after the restart').catch(
        () => {},
      );
      expect(stdout, `the tail ended: ${JSON.stringify(stderr)}`).toContain(after);
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  }, 90_000);
});
