// Regression tests from a review of the CLI (2026-11-28): wakes show and bodies of several lines.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wakegate } from '../helpers/cli-run.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * `wakes show` prints a kept body indented by two spaces, line by line (wakes.ts exchange():
 * `printable(body).replace(/^/gm, '  ')`). But printable() runs first and turns every line
 * feed into the text `\u{a}`, so the /^/gm has one line left to indent: a pretty-printed
 * JSON answer, an HTML page or a text body comes out as one long line full of `\u{a}`
 * (and `\u{9}` for tabs). A line feed or a tab cannot retitle or redraw a terminal; the
 * operator expects to read the body as the lines it has, each indented, with only the
 * dangerous controls (ESC and the like) shown as escapes.
 */
describe('wakes show prints a body of several lines as lines', () => {
  let origin: TestServer;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{\n  "id": 1,\n  "name": "widget"\n}\n');
    });
    t = await startGateway({
      routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
    });
  }, 60_000);
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('indents each line of a pretty-printed JSON answer, without \\u{a} escapes', async () => {
    const r = await fetch(`${t.url}/api/item`, { headers: bearer(t.admin) });
    await r.arrayBuffer();
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const show = await wakegate(['wakes', 'show', id], { WAKEGATE_URL: t.url, WAKEGATE_KEY: t.admin });
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).not.toContain('\\u{a}');
    expect(show.stdout).toContain('\n  {\n    "id": 1,\n    "name": "widget"\n  }\n');
  }, 60_000);
});
