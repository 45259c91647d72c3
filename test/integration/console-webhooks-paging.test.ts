// Regression tests from a review of the console as an attacker (2026-11-27).
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

/** Screenshots of the page with its paging controls (for a person to look at). */
const SHOTS = process.env.SCREENSHOTS_DIR ?? mkdtempSync(join(tmpdir(), 'wakegate-webhooks-'));
mkdirSync(SHOTS, { recursive: true });

/**
 * The Webhooks page, as the Keys page did (keys-page-first-100-only.test.ts), asked for
 * the 100 newest endpoints and the 50 newest deliveries once each and ignored
 * `has_more` / `next_cursor`: an endpoint past the first 100 (still enabled, still receiving every
 * event) could not be seen, disabled or have its secret rotated in the console, and an
 * older failed delivery could not be opened or replayed. Both lists now page as the
 * Wakes page does: "Older" under deliveries (newest first) and "More" under endpoints
 * (listed in id order) while `has_more`, following `next_cursor`.
 */
describe('console: the Webhooks page with more endpoints and deliveries than a page', () => {
  let receiver: Receiver;
  let t: TestGateway;
  let browser: Browser;
  let page: Page;
  let oldEndpoint = '';
  let oldDelivery = '';

  beforeAll(async () => {
    receiver = await startReceiver();
    t = await startGateway({
      webhooks: { allow_insecure_http: true, allow_private_networks: true, retry_schedule_s: [] },
    });
    // An endpoint registered first, with one delivery (a test send) made first...
    const first = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
      url: `${receiver.url}/oldest`,
      events: ['*'],
      environment: 'production',
    });
    expect(first.status).toBe(201);
    oldEndpoint = first.body.id;
    const d = await call(t.url, t.admin, 'POST', `/v2/webhooks/endpoints/${oldEndpoint}/test`);
    expect(d.status).toBe(201);
    oldDelivery = d.body.id;
    // ...then 100 newer endpoints, and 55 newer deliveries.
    for (let i = 0; i < 100; i++) {
      const r = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
        url: `${receiver.url}/hook-${i}`,
        events: ['wake.error'],
        environment: 'production',
      });
      expect(r.status).toBe(201);
    }
    for (let i = 0; i < 55; i++) {
      const r = await call(t.url, t.admin, 'POST', `/v2/webhooks/endpoints/${oldEndpoint}/test`);
      expect(r.status).toBe(201);
    }
    await receiver.waitFor(56, 20_000);
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run'],
    });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await page.goto(`${t.managementUrl}/console/`);
    await page.getByLabel('API key').fill(t.admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await t?.cleanup();
    await receiver?.close();
  });

  it('an endpoint past the first 100 can be reached and acted on', async () => {
    // Endpoints are listed in id order: one the first page of 100 leaves out.
    const first = await call(t.url, t.admin, 'GET', '/v2/webhooks/endpoints?limit=100');
    expect(first.body.has_more).toBe(true);
    const next = await call(
      t.url,
      t.admin,
      'GET',
      `/v2/webhooks/endpoints?limit=100&cursor=${encodeURIComponent(first.body.next_cursor)}`,
    );
    const hidden = next.body.data[0].id as string;
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.locator('tr[data-endpoint]').nth(99).waitFor();
    const row = page.locator(`tr[data-endpoint="${hidden}"]`);
    expect(await row.count()).toBe(0);
    const endpoints = page.locator('section.panel', { has: page.getByRole('heading', { name: 'Endpoints' }) });
    expect(await endpoints.locator('p.more').textContent()).toContain(
      '100 endpoints shown (in id order); more follow.',
    );
    await endpoints.getByRole('button', { name: 'More' }).click();
    await row.waitFor();
    expect(await page.locator('tr[data-endpoint]').count()).toBe(101);
    expect(await endpoints.getByRole('button', { name: 'More' }).count()).toBe(0);
    // Disabled from the page: it stays in view, disabled.
    await row.getByRole('button', { name: 'Disable' }).click();
    await row.locator('.badge', { hasText: 'disabled' }).waitFor();
    expect((await call(t.url, t.admin, 'GET', `/v2/webhooks/endpoints/${hidden}`)).body.status).toBe('disabled');
    expect(await page.locator('tr[data-endpoint]').count()).toBe(101);
  });

  it('a delivery older than the 50 newest can be reached and opened, and stays through the refresh', async () => {
    await page.goto(`${t.managementUrl}/console/#/overview`);
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.locator('tr[data-delivery]').nth(49).waitFor();
    const row = page.locator(`tr[data-delivery="${oldDelivery}"]`);
    expect(await row.count()).toBe(0);
    const deliveries = page.locator('section.panel', { has: page.getByRole('heading', { name: 'Deliveries' }) });
    const more = deliveries.locator('p.more');
    expect(await more.textContent()).toContain('50 newest deliveries shown; older ones follow.');
    await more.scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SHOTS, 'webhooks-deliveries-older.png') });
    await deliveries.getByRole('button', { name: 'Older' }).click();
    await row.waitFor();
    expect(await page.locator('tr[data-delivery]').count()).toBe(56);
    // The list is asked again every 3 s: the older page shown stays.
    await page.waitForTimeout(3500);
    expect(await page.locator('tr[data-delivery]').count()).toBe(56);
    await row.getByRole('button', { name: 'Attempts' }).click();
    await page.getByRole('heading', { name: `Delivery ${oldDelivery}` }).waitFor();
  });
});
