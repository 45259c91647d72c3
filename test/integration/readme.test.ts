import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** The ```sh blocks of one README section, in order, as one script. */
function section(title: string): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf(`\n## ${title}`);
  expect(start, `README has a section "${title}"`).toBeGreaterThan(-1);
  const end = readme.indexOf('\n## ', start + 4);
  const text = readme.slice(start, end === -1 ? undefined : end);
  const blocks = [...text.matchAll(/^( *)```sh\n([\s\S]*?)^\1```/gm)].map((m) =>
    (m[2] as string)
      .split('\n')
      .map((l) => l.slice((m[1] as string).length))
      .join('\n'),
  );
  expect(blocks.length).toBeGreaterThan(0);
  return blocks.join('\n');
}

/**
 * Runs a README section as a reader pastes it into bash, from the repository, with
 * only DATA_DIR pointed at a temporary directory. Everything it started is ended
 * afterwards (its own process group), whatever happened.
 */
function paste(script: string, dataDir: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', DATA_DIR: dataDir },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (c) => {
      out += c;
    });
    p.stderr.on('data', (c) => {
      out += c;
    });
    const timer = setTimeout(() => p.kill('SIGKILL'), 90_000);
    p.on('close', (code) => {
      clearTimeout(timer);
      try {
        process.kill(-(p.pid as number), 'SIGKILL');
      } catch {
        // Nothing left.
      }
      resolve({ code, out });
    });
  });
}

/**
 * The README's fixed ports are free: held by something else (a gateway someone left
 * running), its curls would reach that instead, and fail in ways that say nothing of it.
 */
async function portsFree(ports: readonly number[]): Promise<void> {
  for (const port of ports) {
    const held = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port });
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    expect(held, `port ${port} (the README's) is held by another process here: stop it and run again`).toBe(false);
  }
}

describe('README, as written', () => {
  it('"Two minutes" runs as pasted: the request goes through and its wake is listed', async () => {
    await portsFree([3000, 8080, 8081]);
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-readme-'));
    try {
      const r = await paste(section('Two minutes'), dir);
      expect(r.code, r.out).toBe(0);
      // The same two lines every time, whatever the timing, each ending with a newline.
      expect(r.out.endsWith('\n'), JSON.stringify(r.out)).toBe(true);
      const lines = r.out.trimEnd().split('\n');
      expect(lines, r.out).toHaveLength(2);
      expect(JSON.parse(lines[0] as string)).toMatchObject({ origin: 'my-app', path: '/orders/7' });
      const list = JSON.parse(lines[1] as string);
      expect(list).toMatchObject({ object: 'list', data: [{ object: 'wake', path: '/orders/7', status: 200 }] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('"Getting started" runs as pasted: a sandbox key reaches the sandbox origin, a verified delivery, metrics', async () => {
    await portsFree([8080, 8081, 9001, 9002, 4000]);
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-readme-'));
    try {
      const r = await paste(section('Getting started'), dir);
      expect(r.code, r.out).toBe(0);
      expect(r.out).toContain('"origin":"sandbox"');
      expect(r.out).toMatch(/verified webhook\.test evt_\w+ \(attempt 1\/8\)/);
      expect(r.out).toMatch(/status\s+delivered/);
      expect(r.out).toMatch(/Attempts:\nATTEMPT\s+AT\s+RESPONSE_STATUS[^\n]*\n1\s+\S+\s+200/);
      expect(r.out).toContain('wakegate_requests_total{route="payments",method="GET",status_class="2xx"} 1');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
