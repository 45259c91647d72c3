// Regression tests from a review of the console as an attacker (2026-11-27).
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';

/** Screenshots of the page with its paging control (for a person to look at). */
const SHOTS = process.env.SCREENSHOTS_DIR ?? mkdtempSync(join(tmpdir(), 'wakegate-keys-'));
mkdirSync(SHOTS, { recursive: true });

/**
 * The Keys page asked `GET /v2/api-keys?limit=100` once and ignored `has_more` /
 * `next_cursor`: past the 100 newest keys of an environment, every older key (the
 * long-lived production keys, the bootstrap admin key) dropped off the page, with no
 * "older" control and no note that the list was cut. The operator could not see, nor
 * revoke from the console, a key that was still active; whoever holds `keys:write`
 * could push a key out of the operator's sight by issuing 100 newer ones.
 *
 * The page now pages as the Wakes page does: "Older" under the list while `has_more`,
 * which asks for the next page with `next_cursor`; an action (a revocation) asks again
 * for as many keys as are shown, so the key acted on stays in view with its new state.
 */
describe('console: the Keys page with more than 100 keys', () => {
  let t: TestGateway;
  let browser: Browser;
  let page: Page;
  let oldId = '';

  beforeAll(async () => {
    t = await startGateway({});
    // An active key issued first...
    const old = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'billing-prod',
      environment: 'production',
      scopes: ['wakes:read'],
    });
    expect(old.status).toBe(201);
    oldId = old.body.id;
    // ...then 100 newer ones.
    for (let i = 0; i < 100; i++) {
      const r = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
        label: `ci-${i}`,
        environment: 'production',
        scopes: ['wakes:read'],
      });
      expect(r.status).toBe(201);
    }
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run'],
    });
    page = await (await browser.newContext()).newPage();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await t?.cleanup();
  });

  it('an active key older than the 100 newest can still be found and revoked on the page', async () => {
    // The API has it, active.
    const k = await call(t.url, t.admin, 'GET', `/v2/api-keys/${oldId}`);
    expect(k.status).toBe(200);

    await page.goto(`${t.managementUrl}/console/`);
    await page.getByLabel('API key').fill(t.admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.locator('tr[data-key]').first().waitFor();
    await page.locator('tr[data-key]').nth(99).waitFor();
    // Any paging control the page offers is followed (a few pages at most).
    const row = page.locator(`tr[data-key="${oldId}"]`);
    for (let i = 0; i < 5 && (await row.count()) === 0; i++) {
      const more = page.getByRole('button', { name: /older|more|next|load/i });
      if ((await more.count()) === 0) break;
      await more.first().click();
      await page.waitForTimeout(500);
    }
    expect(await row.count(), `rows shown: ${await page.locator('tr[data-key]').count()}, no way to the others`).toBe(
      1,
    );
    // The bootstrap admin key, the oldest, is there too, and no "Older" is left.
    const adminId = (await call(t.url, t.admin, 'GET', '/v2/environments')).body.key.id as string;
    expect(await page.locator(`tr[data-key="${adminId}"]`).count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Older' }).count()).toBe(0);
    expect(await page.locator('tr[data-key]').count()).toBe(102);

    // Revoked from the page: the older key stays in view, revoked.
    await row.getByRole('button', { name: 'Revoke now' }).click();
    await page.getByRole('button', { name: 'Revoke billing-prod' }).click();
    await row.locator('.badge', { hasText: 'revoked' }).waitFor();
    expect((await call(t.url, t.admin, 'GET', `/v2/api-keys/${oldId}`)).body.revoked_at).toMatch(/^\d{4}-/);
    expect(await page.locator('tr[data-key]').count()).toBe(102);
  });

  it('shows how many keys it shows and an "Older" button while there are more', async () => {
    await page.goto(`${t.managementUrl}/console/#/overview`);
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.locator('tr[data-key]').nth(99).waitFor();
    const more = page.locator('p.more');
    await more.waitFor();
    expect(await more.textContent()).toContain('100 newest keys shown; older ones follow.');
    await page.setViewportSize({ width: 1280, height: 800 });
    await more.scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SHOTS, 'keys-older.png') });
    // A status filter starts again from its own first page.
    await page.getByLabel('Status').selectOption('revoked');
    await page.locator(`tr[data-key="${oldId}"]`).waitFor();
    expect(await page.locator('tr[data-key]').count()).toBe(1);
    expect(await page.locator('p.more').count()).toBe(0);
  });
});
