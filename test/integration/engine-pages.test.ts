import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { cleanMappings } from '../../src/store/engine-pages.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

// The embedded engine's library pages that only its load touched leave the gateway's
// resident set once it listens (store/engine-pages.ts), and the engine goes on working.
describe.skipIf(process.platform !== 'linux')("the engine library's load-time pages (child gateway)", () => {
  let origin: TestServer;
  let dir: string;
  let g: ChildGateway;
  const admin = `svc_live_${newSecret()}`;
  const auth = { authorization: `Bearer ${admin}` };

  beforeAll(async () => {
    origin = await startServer((_req, res) => res.end('{"ok":true}'));
    dir = mkdtempSync(join(tmpdir(), 'wakegate-engine-pages-'));
    writeFileSync(join(dir, 'cfg.yaml'), 'log:\n  level: info\n');
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      ORIGIN_URL: origin.url,
      WAKEGATE_ADMIN_KEY: admin,
    });
  });
  afterAll(async () => {
    g?.proc.kill('SIGTERM');
    await g?.exited;
    await origin?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('says how much it let go, holds less of the library than that afterwards, and stores every wake after it', async () => {
    const line = g
      .stderr()
      .split('\n')
      .find((l) => l.includes("storage engine: its library's load-time pages let go"));
    expect(line, g.stderr()).toBeDefined();
    const mb = (JSON.parse(line as string) as { mb: number }).mb;
    // libchdb.so's load reads through well over 50 MB of it (about 150 MB measured).
    expect(mb).toBeGreaterThan(50);
    const held = cleanMappings(readFileSync(`/proc/${g.proc.pid}/smaps`, 'utf8'), /\/libchdb\.so$/);
    expect(held.length).toBeGreaterThan(0);
    const heldMb = held.reduce((a, m) => a + m.resident, 0) / 2 ** 20;
    expect(heldMb).toBeLessThan(mb / 2);

    // The engine's code faults back in as it runs: proxied requests are stored and listed.
    for (let i = 0; i < 40; i++) expect((await fetch(`${g.url}/pages/${i}`)).status).toBe(200);
    await until(
      async () => {
        const page = (await (await fetch(`${g.url}/v2/wakes?path=/pages/*&limit=100`, { headers: auth })).json()) as {
          data: unknown[];
        };
        return page.data.length === 40;
      },
      20_000,
      'the 40 wakes to be stored',
    );
  });
});
