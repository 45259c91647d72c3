import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKeySecret } from '../../src/auth/secrets.js';
import { maskKey } from '../../src/cli/hide-key.js';
import { GATEWAY } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/** A request the local "gateway" holds open until the test has read the CLI's command line. */
interface Held {
  authorization: string | undefined;
  answer: () => void;
}

/**
 * Issue #34, item 13: a key on the CLI's command line is readable by every user in
 * /proc/PID/cmdline. The CLI is started as a child process against a server that
 * holds its request open; its command line is read from /proc while it waits.
 */
describe("the CLI's key is never left in /proc/PID/cmdline", () => {
  let server: TestServer;
  let dir: string;
  const waiting: ((h: Held) => void)[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-cli-secret-'));
    server = await startServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"object":"list","data":[],"has_more":false,"next_cursor":null}');
      };
      const w = waiting.shift();
      if (w) w({ authorization: req.headers.authorization, answer });
      else answer();
    });
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Runs `keys list` with `args`; while its request is held, what /proc shows of it. */
  async function listHeld(args: string[], o: { env?: Record<string, string>; stdin?: string } = {}) {
    const held = new Promise<Held>((r) => waiting.push(r));
    const child = spawn(process.execPath, [...GATEWAY, 'keys', 'list', '--url', server.url, ...args], {
      env: { PATH: process.env.PATH ?? '', ...o.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c) => {
      stderr += c;
    });
    child.stdout.resume();
    child.stdin.end(o.stdin ?? '');
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const h = await Promise.race([held, exited.then((code) => Promise.reject(new Error(`exited ${code}: ${stderr}`)))]);
    const cmdline = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8');
    h.answer();
    return { cmdline, authorization: h.authorization, code: await exited, stderr };
  }

  it('--key SECRET and --key=SECRET: the key works, is overwritten before the request is made, and one line warns', async () => {
    for (const form of ['separate', 'joined']) {
      const secret = newKeySecret('live');
      const r = await listHeld(form === 'separate' ? ['--key', secret] : [`--key=${secret}`]);
      expect(r.authorization).toBe(`Bearer ${secret}`);
      expect(r.cmdline).not.toContain(secret);
      expect(r.cmdline).not.toContain(secret.slice(9, 20));
      // The rest of the command is still shown, masked, for ps and top.
      expect(r.cmdline).toContain(`keys list --url ${server.url} --key`);
      expect(r.code).toBe(0);
      expect(r.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(/--key-file PATH \(- for stdin\) or WAKEGATE_KEY$/),
      ]);
    }
  }, 60_000);

  it('--key-file PATH, --key-file - (stdin) and WAKEGATE_KEY: the key never reaches the command line, no warning', async () => {
    const secret = newKeySecret('live');
    const file = join(dir, 'key');
    writeFileSync(file, `${secret}\n`, { mode: 0o600 });
    for (const [args, o] of [
      [['--key-file', file], {}],
      [['--key-file', '-'], { stdin: `${secret}\n` }],
      [[], { env: { WAKEGATE_KEY: secret } }],
    ] as const) {
      const r = await listHeld([...args], o);
      expect(r.authorization).toBe(`Bearer ${secret}`);
      expect(r.cmdline).not.toContain(secret);
      expect(r.code).toBe(0);
      expect(r.stderr).toBe('');
    }
  }, 60_000);

  it('--key-file - with nothing on stdin is one usage line', async () => {
    const child = spawn(process.execPath, [...GATEWAY, 'keys', 'list', '--url', server.url, '--key-file', '-'], {
      env: { PATH: process.env.PATH ?? '' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c) => {
      stderr += c;
    });
    child.stdin.end('');
    expect(await new Promise((r) => child.on('exit', r))).toBe(2);
    // It names the stdin that held no key (it said only that a key was needed).
    expect(stderr).toMatch(/^wakegate: --key-file - \(stdin\) holds no key: its first line is empty\n/);
  }, 30_000);

  it('property: for any command line, no value given to --key survives the mask, and the line never grows', () => {
    const base62 = fc.constantFrom(...'0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'.split(''));
    const secret = fc.array(base62, { minLength: 32, maxLength: 128 }).map((c) => `svc_live_${c.join('')}`);
    const other = fc.constantFrom(
      'keys',
      'list',
      '--json',
      '--url',
      'http://127.0.0.1:8080',
      '--label',
      'x',
      '--',
      '-h',
    );
    const part = fc.oneof(
      other.map((a) => ({ args: [a], secret: null as string | null })),
      secret.map((s) => ({ args: ['--key', s], secret: s })),
      secret.map((s) => ({ args: [`--key=${s}`], secret: s })),
    );
    fc.assert(
      fc.property(fc.array(part, { maxLength: 12 }), (parts) => {
        const argv = ['/usr/bin/node', '/x/dist/main.js', ...parts.flatMap((p) => p.args)];
        const masked = maskKey(argv);
        const shown = masked.join(' ');
        for (const p of parts) if (p.secret) expect(shown).not.toContain(p.secret.slice(9));
        expect(shown.length).toBeLessThanOrEqual(argv.join(' ').length);
        expect(masked).toHaveLength(argv.length);
      }),
      { numRuns: 500 },
    );
  });
});
