// Regression tests from a review of the CLI (2026-11-28): wakes tail against a gateway whose clock differs from this machine's.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY } from '../helpers/child.js';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

/**
 * wakes.ts wakesTail: when the first poll finds no wake matching the filters (a fresh
 * gateway, or `--status-class 5xx` on a quiet day), it sets `newest ??= Date.now()`:
 * THIS machine's clock. Every later poll asks for `since = newest - 15 s`, and the
 * wakes' captured_at are stamped by the GATEWAY's clock. An operator's laptop or a
 * bastion host running two minutes ahead of the gateway (or a gateway two minutes behind)
 * is enough: every new wake is captured "before" the window, none is ever returned, and
 * the tail prints nothing, for good, with no error. The help promises each new wake
 * once; the window should be anchored on the gateway's time (a captured_at, the Date
 * header of its answers), never on the local clock.
 */
describe('wakes tail when the gateway clock is two minutes behind', () => {
  let origin: TestServer;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end('ok');
    });
    t = await startGateway(
      { routes: [{ name: 'app', prefix: '/app', auth: 'none', origins: { production: origin.url } }] },
      { clock: { now: () => Date.now() - 120_000 } },
    );
  }, 60_000);
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('prints a wake captured after it started', async () => {
    const child = spawn(
      process.execPath,
      [...GATEWAY, 'wakes', 'tail', '--route', 'app', '--json', '--max', '1', '--interval-ms', '200'],
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
    try {
      await until(() => stderr.includes('tailing wakes'), 30_000, 'the tail to start');
      const r = await fetch(`${t.url}/app/order`);
      await r.arrayBuffer();
      const id = r.headers.get('x-wake-id');
      await flushed(t.gw);
      // Ten polls' worth and more: the wake is stored and listed by the API at once.
      const listed = await fetch(`${t.url}/v2/wakes?route=app`, { headers: { authorization: `Bearer ${t.admin}` } });
      expect(((await listed.json()) as { data: { id: string }[] }).data.map((w) => w.id)).toEqual([id]);
      await until(() => stdout.includes('\n') || child.exitCode !== null, 8_000, 'the tail to print the wake').catch(
        () => {},
      );
      expect(stdout, stderr).toContain(`"id":"${id}"`);
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  }, 60_000);
});
