import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

// Regression tests from a review of the console as an attacker (2026-11-27).

/**
 * The defect (/v2 read API + console), fixed: /v2 answers carry no `Cache-Control` (no `no-store`,
 * no `Vary: Authorization`), so the browser keeps every answer the console fetched in
 * its HTTP cache (on disk), keyed by URL alone. After _Sign out_ the same browser still
 * answers `GET /v2/wakes/{id}` (the captured request and response: path, query, headers,
 * bodies) from that cache to a request that carries NO key at all.
 *
 * docs/console-and-cli.md: the key "stays in the tab's session storage ... and _Sign
 * out_ clears it"; docs/security.md (the ops listener row): one cannot "call `/v2`
 * without a key: the console and `/v2` there ask for a key like anywhere else". The API
 * already marks the answers that carry a secret `Cache-Control: no-store` (POST
 * /v2/api-keys, POST .../rotate-secret), but not those that carry captured traffic.
 * Correct behaviour: /v2 answers are `Cache-Control: no-store` (at least the ones that
 * carry captured data), so after Sign out nothing the key could read is readable
 * without it; a keyless request is answered 401.
 */
describe('console: what a signed-in key read stays readable after Sign out', () => {
  let origin: TestServer;
  let t: TestGateway;
  let browser: Browser;
  let page: Page;
  const fetched: string[] = [];

  beforeAll(async () => {
    origin = await echoOrigin();
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/', auth: 'none', origins: { production: origin.url } }],
    });
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run'],
    });
    page = await (await browser.newContext()).newPage();
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (r.method() === 'GET' && u.pathname.startsWith('/v2/wakes/')) fetched.push(u.pathname + u.search);
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.cleanup();
    await origin?.close();
  });

  it('after Sign out, a wake the console showed is not readable without a key', async () => {
    const r = await fetch(`${t.url}/patients/7/notes?visit=2026-11-02`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ diagnosis: 'type 2 diabetes', patient: 'Jane Roe' }),
    });
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);

    await page.goto(`${t.managementUrl}/console/`);
    await page.getByLabel('API key').fill(t.admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.goto(`${t.managementUrl}/console/#/wakes/${id}`);
    await page.getByRole('heading', { name: 'Request' }).waitFor();
    await page.getByText('type 2 diabetes').first().waitFor();
    const url = fetched.find((u) => u.startsWith(`/v2/wakes/${id}`)) as string;
    expect(url).toBeTruthy();

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    expect(await page.evaluate('sessionStorage.length')).toBe(0);

    // A request with no Authorization header at all, as any script of this origin (or
    // anyone at this browser profile later) can make it.
    const answer = (await page.evaluate(async (u) => {
      const res = await fetch(u, { cache: 'force-cache' } as RequestInit);
      return { status: res.status, text: await res.text() };
    }, url)) as { status: number; text: string };
    expect(
      answer.text.includes('type 2 diabetes'),
      `a keyless request was answered ${answer.status} with the captured wake (from the HTTP cache)`,
    ).toBe(false);
    expect(answer.status).toBe(401);
  });

  it('/v2 answers that carry captured traffic say Cache-Control: no-store', async () => {
    const r = await fetch(`${t.url}/orders/1`);
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const auth = { authorization: `Bearer ${t.admin}` };
    for (const path of [`/v2/wakes/${id}`, '/v2/wakes']) {
      const res = await fetch(`${t.managementUrl}${path}`, { headers: auth });
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control') ?? '', path).toMatch(/no-store/);
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
  });
});
