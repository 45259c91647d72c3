import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts } from '../helpers/certs.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

// An operator who edits a route and sends SIGHUP, as nginx and Envoy take it, heard nothing:
// the gateway read its certificates again (or, without TLS, did nothing) and said neither.
// One line now says what SIGHUP read again and that the config file needs a restart.
describe('SIGHUP on a gateway without TLS', () => {
  let origin: TestServer;
  let dir: string;
  let g: ChildGateway;
  beforeAll(async () => {
    origin = await echoOrigin();
    dir = mkdtempSync(join(tmpdir(), 'wakegate-sighup-'));
    g = await spawnGateway(['serve'], { DATA_DIR: join(dir, 'data'), ORIGIN_URL: origin.url });
  });
  afterAll(async () => {
    g?.proc.kill('SIGTERM');
    await g?.exited;
    await origin?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('logs one line naming what was and was not read again, and serves on', async () => {
    g.proc.kill('SIGHUP');
    const deadline = Date.now() + 10_000;
    while (!g.stderr().includes('"msg":"SIGHUP') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const line = g
      .stderr()
      .split('\n')
      .find((l) => l.includes('"msg":"SIGHUP'));
    expect(line, g.stderr()).toBeDefined();
    const entry = JSON.parse(line as string) as { level: string; msg: string; not_reloaded: string };
    expect(entry.msg).toBe('SIGHUP: no TLS certificates to read again');
    expect(entry.not_reloaded).toMatch(/routes.*restart/);
    expect((await fetch(`http://127.0.0.1:${g.opsPort}/healthz`)).status).toBe(200);
    expect(g.proc.exitCode).toBeNull();
  });
});

/** Waits for the SIGHUP line after `from` characters of stderr; answers it parsed. */
async function sighupLine(g: ChildGateway, from: number): Promise<{ msg: string; not_reloaded: string }> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const line = g
      .stderr()
      .slice(from)
      .split('\n')
      .find((l) => l.includes('"msg":"SIGHUP'));
    if (line !== undefined) return JSON.parse(line) as { msg: string; not_reloaded: string };
    if (Date.now() > deadline) throw new Error(`no SIGHUP line:\n${g.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('SIGHUP on a gateway with TLS', () => {
  it('says the certificates were read again, and then that one did not load', async () => {
    const certs = makeCerts();
    const origin = await echoOrigin();
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-sighup-tls-'));
    const cfg = join(dir, 'cfg.yaml');
    writeFileSync(
      cfg,
      `server:\n  tls:\n    certificates:\n      - { cert: ${certs.server.cert}, key: ${certs.server.key} }\nroutes:\n  - { name: all, prefix: /, auth: none, origins: { production: ${origin.url} } }\n`,
    );
    const g = await spawnGateway(['serve', '--config', cfg], { DATA_DIR: join(dir, 'data') });
    try {
      let from = g.stderr().length;
      g.proc.kill('SIGHUP');
      expect((await sighupLine(g, from)).msg).toBe('SIGHUP: TLS certificates read again');
      writeFileSync(certs.server.cert, 'not a certificate');
      from = g.stderr().length;
      g.proc.kill('SIGHUP');
      const bad = await sighupLine(g, from);
      expect(bad.msg).toBe('SIGHUP: TLS certificates read again, some not loaded (the old ones serve)');
      expect(bad.not_reloaded).toMatch(/restart/);
    } finally {
      g.proc.kill('SIGTERM');
      await g.exited;
      await origin.close();
      certs.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
