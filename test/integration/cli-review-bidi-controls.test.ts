// Regression tests from a review of the CLI (2026-11-28): Unicode bidirectional controls in stored values.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wakegate } from '../helpers/cli-run.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/** The bidirectional embedding, override and isolate controls (U+202A..U+202E, U+2066..U+2069). */
const BIDI = /[\u202a-\u202e\u2066-\u2069]/;

/**
 * table.ts printable() escapes C0 and C1 controls "so a label or consumer can never ...
 * erase lines (an operator's screen is not the API's to drive)", but passes the Unicode
 * bidi controls. The API refuses ESC in a label yet takes U+202E RIGHT-TO-LEFT OVERRIDE,
 * and a client may send it in any body. Printed raw, it makes the terminal draw the
 * rest of the line backwards ("Trojan Source", CVE-2021-42574): a key labelled
 * `deploy\u202Enimda` reads `deployadmin` in `keys list`, its row's later cells reversed
 * with it; a body line can be made to read as something else in `wakes show`. They are
 * as invisible and as able to mislead as the controls already escaped: shown as
 * `\u{202e}` the operator sees what is stored.
 */
describe('bidi controls are shown as escapes, as C0 and C1 controls are', () => {
  let origin: TestServer;
  let t: TestGateway;
  let env: Record<string, string>;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('amount: 10\u202e00.0001 :refund\n');
    });
    t = await startGateway({
      routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
    });
    await t.gw.keys.create(
      { label: 'deploy\u202enimda', environment: 'production', scopes: ['wakes:read'] },
      'production',
    );
    env = { WAKEGATE_URL: t.url, WAKEGATE_KEY: t.admin };
  }, 60_000);
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('keys list: a label holding U+202E', async () => {
    const r = await wakegate(['keys', 'list'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('deploy');
    expect(r.stdout).not.toMatch(BIDI);
    expect(r.stdout).toContain('deploy\\u{202e}nimda');
  }, 60_000);

  it('wakes show: an answer body holding U+202E', async () => {
    const res = await fetch(`${t.url}/api/x`, { headers: bearer(t.admin) });
    await res.arrayBuffer();
    await flushed(t.gw);
    const r = await wakegate(['wakes', 'show', res.headers.get('x-wake-id') as string], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('amount: 10');
    expect(r.stdout).not.toMatch(BIDI);
  }, 60_000);
});
