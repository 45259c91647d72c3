// Regression tests from a review of the CLI (2026-11-28): --key-file that holds no key.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { GATEWAY } from '../helpers/child.js';

const dir = mkdtempSync(join(tmpdir(), 'wakegate-review-keyfile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The CLI from the sources with `input` on stdin; no gateway is needed: it stops before any call. */
const run = (args: string[], input: string, env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [...GATEWAY, ...args], {
    input,
    encoding: 'utf8',
    timeout: 60_000,
    env: { PATH: process.env.PATH ?? '', WAKEGATE_URL: 'http://127.0.0.1:1', ...env },
  });

/**
 * client.ts: a --key-file that reads as empty (`pass show wakegate | wakegate ... --key-file -`
 * when pass failed and printed nothing; an empty or blank file) leaves the key '' and
 * the CLI says `this command needs a key: WAKEGATE_KEY, or --key-file PATH (- for stdin)`:
 * it tells the operator to do what they did, and, with WAKEGATE_KEY set, to set what
 * is set (the file, given, is preferred over it). It should say the file (or stdin)
 * held no key.
 */
describe('a --key-file that holds no key is named as the fault', () => {
  it('--key-file - with empty stdin', () => {
    const r = run(['keys', 'list', '--key-file', '-'], '', { WAKEGATE_KEY: `svc_live_${'a'.repeat(40)}` });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^wakegate: .*(stdin|--key-file -).*(empty|no key)/i);
  }, 60_000);

  it('--key-file PATH of blank lines', () => {
    const file = join(dir, 'blank.key');
    writeFileSync(file, '\n\r\n  \n');
    const r = run(['keys', 'list', '--key-file', file], '');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(file);
    expect(r.stderr).toMatch(/empty|no key/i);
  }, 60_000);
});
