// Regression tests from a review of the operator's second day (2026-11-28).
// `wakegate wakes tail | head -n 1` ends with a Node stack trace (unhandled EPIPE) and exit 1 once head has gone
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY } from '../helpers/child.js';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

/**
 * docs/console-and-cli.md: `wakes tail` prints each new wake "until Ctrl-C or --max N",
 * with --json "one JSON object a line": made to be piped (`| head`, `| jq`, `| grep -m1`).
 * When the reader goes away, the next line written fails with EPIPE; src/run.ts's `out`
 * writes to process.stdout with no 'error' listener, so Node prints its unhandled
 * 'error' event and stack ("node:events ... throw er; Error: write EPIPE ... at wakesTail")
 * and exits 1, where a CLI ends quietly (as `yes | head` does).
 */
describe('wakes tail into a reader that stops reading', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end('ok');
    });
    t = await startGateway({
      routes: [{ name: 'app', prefix: '/', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('ends without a stack trace once the pipe is closed (as `| head -n 1` closes it)', async () => {
    const child = spawn(process.execPath, [...GATEWAY, 'wakes', 'tail', '--interval-ms', '100'], {
      env: { PATH: process.env.PATH ?? '', WAKEGATE_URL: t.url, WAKEGATE_KEY: t.admin },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => {
      stdout += c;
    });
    child.stderr.on('data', (c) => {
      stderr += c;
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      child.on('exit', (code, signal) => r({ code, signal })),
    );
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    let i = 0;
    const send = async () => {
      await (await fetch(`${t.url}/orders/${i++}`)).arrayBuffer();
      await flushed(t.gw);
    };
    try {
      await until(() => stderr.includes('tailing wakes'), 30_000, 'the tail to start');
      // head -n 1: reads the first line, then closes its end of the pipe.
      await send();
      await until(() => stdout.includes('\n'), 30_000, 'the first line');
      child.stdout.destroy();
      // More traffic: the tail writes its next line into the closed pipe.
      const done = (async () => {
        for (let n = 0; n < 40 && child.exitCode === null && child.signalCode === null; n++) {
          await send();
          await new Promise((r) => setTimeout(r, 150));
        }
      })();
      const exit = await exited;
      await done;
      // Ending is right (nobody reads any more); a stack trace on the operator's terminal is not.
      expect(stderr).not.toMatch(/Unhandled 'error' event|Error: write EPIPE|\n\s+at \S+ \(/);
      expect(exit.code === 0 || exit.signal === 'SIGPIPE', JSON.stringify(exit)).toBe(true);
    } finally {
      clearTimeout(killer);
      child.kill('SIGKILL');
    }
  }, 90_000);
});
