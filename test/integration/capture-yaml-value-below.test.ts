// Regression tests from a review of capture and redaction (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../../src/store/store.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * docs/capture.md: "Line formats are read too: `name: value`, `name = value` and
 * `name=value` lines in YAML, TOML, `.properties`, `.env` and `text/*` bodies" (DESIGN
 * "Wake detail and replay"). These bodies are read by their parsers as holding
 * `password`, and the value is stored in clear.
 */
describe('line formats whose named value is stored in clear', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      routes: [{ name: 'pub', prefix: '/pub', auth: 'none', origins: { production: origin.url } }],
    });
  }, 20_000);
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  // biome-ignore lint/suspicious/noExplicitAny: wakes are read loosely
  const send = async (body: string, type: string): Promise<any> => {
    const r = await fetch(`${t.url}/pub/cfg`, { method: 'POST', headers: { 'content-type': type }, body });
    await r.arrayBuffer();
    await flushed(t.gw);
    const w = await (
      await fetch(`${t.url}/v2/wakes/${r.headers.get('x-wake-id')}`, { headers: bearer(t.admin) })
    ).json();
    expect(w.request, 'the wake kept its detail').not.toBeNull();
    return w;
  };
  const stored = async () => JSON.stringify(await queryRows(t.gw.store, `SELECT * FROM ${t.gw.store.db}.wake_details`));

  it('YAML whose password value stands on the next, indented line (js-yaml reads password: hunter2-nextline): not stored', async () => {
    const body = 'user: ann\npassword:\n  hunter2-nextline\nother: 1\n';
    const w = await send(body, 'application/yaml');
    expect(w.request.body).not.toContain('hunter2-nextline');
    expect(await stored()).not.toContain('hunter2-nextline');
  });

  it('.properties with a whitespace separator (java.util.Properties reads "password hunter2-props-space"): not stored', async () => {
    const body = 'user=ann\npassword hunter2-props-space\n';
    const w = await send(body, 'text/x-java-properties');
    expect(w.request.body).not.toContain('hunter2-props-space');
    expect(await stored()).not.toContain('hunter2-props-space');
  });
});
