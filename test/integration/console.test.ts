import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

// Screenshots go to SCREENSHOTS_DIR (docs/console when the pictures of docs/console-and-cli.md are remade), else a temp dir.
const SHOTS = process.env.SCREENSHOTS_DIR ?? mkdtempSync(join(tmpdir(), 'wakegate-console-'));
mkdirSync(SHOTS, { recursive: true });

describe('the console, in a real headless Chromium against a real gateway', () => {
  let origin: TestServer;
  let receiver: Receiver;
  let t: TestGateway;
  let browser: Browser;
  let page: Page;
  let appKey: string;
  const foreign: string[] = [];
  let price = 10;
  /** What the origin was sent: URL and body. */
  const seen: { url: string; body: string }[] = [];
  /** The bodies the origin was sent, as bytes. */
  const seenRaw: Buffer[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ url: req.url ?? '', body: Buffer.concat(chunks).toString() });
        seenRaw.push(Buffer.concat(chunks));
        const fail = req.url?.includes('fail');
        if (req.url?.includes('slow')) {
          setTimeout(() => {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end('{}');
          }, 1100);
          return;
        }
        res.writeHead(fail ? 503 : 200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 1, name: 'widget', price, password: 'never-shown' }));
      });
    });
    receiver = await startReceiver();
    receiver.answer = (_req, res) => {
      res.statusCode = 500;
      res.end('receiver down');
    };
    t = await startGateway({
      routes: [
        {
          name: 'api',
          prefix: '/api',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url, sandbox: origin.url },
        },
        { name: 'slow', prefix: '/slow', auth: 'none', origins: { production: origin.url } },
        {
          name: 'plain',
          prefix: '/plain',
          auth: 'none',
          origins: { production: origin.url },
          capture: { detail: { headers: false, bodies: false } },
        },
      ],
      webhooks: { allow_insecure_http: true, allow_private_networks: true, retry_schedule_s: [] },
    });
    appKey = (
      await t.gw.keys.create(
        { label: 'storefront', environment: 'production', scopes: ['payments:read', 'payments:write'] },
        'production',
      )
    ).secret;
    for (let i = 0; i < 30; i++) await fetch(`${t.url}/api/items/${i % 3}`, { headers: bearer(appKey) });
    for (let i = 0; i < 3; i++) await fetch(`${t.url}/api/fail/${i}`, { headers: bearer(appKey) });
    await flushed(t.gw);
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write']);
    page = await ctx.newPage();
    page.on('request', (r) => {
      if (!r.url().startsWith(t.managementUrl)) foreign.push(r.url());
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t.cleanup();
    await origin.close();
    await receiver.close();
  });

  const shot = (name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

  it('serves the app with a strict CSP and nothing from elsewhere, and signs in with a pasted key', async () => {
    const res = await fetch(`${t.managementUrl}/console/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toMatch(/default-src 'self'/);
    expect(res.headers.get('x-wake-id')).toMatch(/^wk_/);
    const html = await res.text();
    expect(html).not.toMatch(/<script>|style=|https?:\/\//);
    const t0 = Date.now();
    await page.goto(`${t.managementUrl}/console/`);
    await page.getByLabel('API key').waitFor();
    console.log(`console: sign-in page ready in ${Date.now() - t0} ms on loopback`);
    await shot('signin');
    await page.getByLabel('API key').fill(t.admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByText('Requests per minute').waitFor({ timeout: 5000 });
    await page.locator('figure.chart svg circle').first().waitFor({ timeout: 5000 });
    expect(await page.evaluate('sessionStorage.getItem("wakegate.key")')).toBe(t.admin);
    expect(page.url()).not.toContain(t.admin);
    expect((await page.context().cookies()).length).toBe(0);
    await page.getByRole('link', { name: /GET \/api\/fail\/2/ }).waitFor({ timeout: 5000 });
    await shot('overview');
  });

  it('shows a request just made in Wakes, opens it, and replays it with the diff', async () => {
    const r = await fetch(`${t.url}/api/items/42?verbose=1`, { headers: bearer(appKey) });
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    await page.getByRole('link', { name: 'Wakes' }).click();
    await page.getByRole('link', { name: '/api/items/42' }).first().waitFor();
    await shot('wakes');
    await page.getByRole('link', { name: '/api/items/42' }).first().click();
    await page.getByRole('heading', { name: 'Request' }).waitFor();
    expect(page.url()).toContain(id);
    // Redaction is shown as such: the key and the password never reach the page.
    await page
      .locator('mark', { hasText: /\[redacted:/ })
      .first()
      .waitFor();
    expect(await page.content()).not.toContain(appKey);
    expect(await page.content()).not.toContain('never-shown');
    await page.getByRole('button', { name: 'Copy as curl' }).click();
    // The command names the proxy (the main listener), not the listener the console is served from.
    // The key's Authorization header was redacted: it is a shell variable the comment line names.
    expect(await page.evaluate('navigator.clipboard.readText()')).toMatch(
      new RegExp(
        `^# Redacted values: set AUTHORIZATION \\(header authorization\\) before running this\\.\ncurl -g -X GET '${t.url}/api/items/42\\?verbose=1'`,
      ),
    );
    price = 12;
    await page.getByRole('button', { name: 'Replay' }).click();
    await page.getByText('The answer changed').waitFor({ timeout: 15_000 });
    await page.locator('.diff code', { hasText: '$.price' }).waitFor();
    await shot('wake-replay');
    price = 10;
  });

  it('replays a wake with redacted values by asking for them in a form; copy as curl names them as shell variables', async () => {
    const r = await fetch(`${t.url}/api/orders?password=hunter2&page=2`, {
      method: 'GET',
      headers: { ...bearer(appKey), 'x-api-key': 'legacy-secret' },
    });
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    await page.goto(`${t.managementUrl}/console/#/wakes/${id}`);
    await page.getByRole('heading', { name: 'Request' }).waitFor();
    await page.getByRole('button', { name: 'Copy as curl' }).click();
    const curl = (await page.evaluate('navigator.clipboard.readText()')) as string;
    // A marker is never written as if it were the value: a variable, named in a comment.
    expect(curl).not.toMatch(/redacted:/);
    const [comment, command] = curl.split('\n') as [string, string];
    expect(comment).toMatch(/^# Redacted values: set .* before running this\.$/);
    for (const v of [
      'PASSWORD (query password)',
      'X_API_KEY (header x-api-key)',
      'AUTHORIZATION (header authorization)',
    ])
      expect(comment).toContain(v);
    expect(command).toMatch(/^curl -g -X GET /);
    expect(curl).toContain(`'${t.url}/api/orders?password='"$PASSWORD"'&page=2'`);
    expect(curl).toContain(`-H 'x-api-key: '"$X_API_KEY"`);
    await page.getByRole('button', { name: 'Replay' }).click();
    const form = page.getByRole('form', { name: 'Redacted values for the replay' });
    await form.waitFor();
    await shot('wake-replay-values');
    await form.getByLabel(/query\s*password/).fill('hunter2');
    const before = seen.length;
    await form.getByRole('button', { name: 'Replay with these values' }).click();
    await page.getByText(/Identical answer|The answer changed/).waitFor({ timeout: 15_000 });
    const sent = seen.slice(before).map((x) => x.url);
    // The value typed was sent in place of the marker; the header left empty was left out.
    expect(sent).toEqual(['/api/orders?password=hunter2&page=2']);
    await shot('wake-replayed-with-values');
  });

  it('asks for the redacted values inside a gzip-compressed body before a replay, and sends them compressed', async () => {
    const r = await fetch(`${t.url}/api/orders/gz`, {
      method: 'POST',
      headers: { ...bearer(appKey), 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(JSON.stringify({ password: 'hunter2', qty: 1 })),
    });
    await r.arrayBuffer();
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    await page.goto(`${t.managementUrl}/console/#/wakes/${id}`);
    await page.getByRole('heading', { name: 'Request' }).waitFor();
    await page.getByRole('button', { name: 'Replay' }).click();
    // The marker is inside the compressed bytes: the form asks for it, by its JSON path.
    const form = page.getByRole('form', { name: 'Redacted values for the replay' });
    await form.waitFor();
    await form.getByLabel(/body\s*\$\.password/).fill('hunter3');
    const before = seenRaw.length;
    await form.getByRole('button', { name: 'Replay with these values' }).click();
    await page.getByRole('button', { name: 'Replay anyway' }).click();
    await page.getByText(/Identical answer|The answer changed/).waitFor({ timeout: 15_000 });
    const sent = seenRaw.slice(before);
    expect(sent).toHaveLength(1);
    expect(JSON.parse(gunzipSync(sent[0] as Buffer).toString())).toEqual({ password: 'hunter3', qty: 1 });
  });

  it('names a request no route matched as such, and the p95 axis label fits its chart', async () => {
    await (await fetch(`${t.url}/nowhere/at/all`)).arrayBuffer();
    await (await fetch(`${t.url}/slow/1`)).arrayBuffer();
    await flushed(t.gw);
    await page.goto(`${t.managementUrl}/console/#/wakes`);
    await page.getByRole('link', { name: '/nowhere/at/all' }).first().waitFor();
    const row = page.locator('tr', { has: page.getByRole('link', { name: '/nowhere/at/all' }) }).first();
    expect(await row.textContent()).toContain('no route matched');
    expect(await row.textContent()).not.toMatch(/\bnone\b/);
    await page.getByRole('link', { name: 'Overview' }).click();
    const p95 = page.locator('figure.chart svg[aria-label="p95 latency per minute by route"]');
    await p95.locator('circle').first().waitFor({ timeout: 5000 });
    // Every tick label lies inside the chart (it was cut at the left past 4 characters).
    const boxes = (await p95.evaluate((svg) =>
      [...svg.querySelectorAll('text.tick')].map((el) => {
        const b = (el as unknown as { getBBox(): { x: number; width: number } }).getBBox();
        return { text: el.textContent, x: b.x, right: b.x + b.width };
      }),
    )) as { text: string; x: number; right: number }[];
    expect(boxes.map((b) => b.text)).toContain('2 s');
    for (const b of boxes) expect(b.x, `${b.text} starts inside the chart`).toBeGreaterThanOrEqual(0);
    await shot('overview-p95');
  });

  it('says why a wake has no request or response to show', async () => {
    const r = await fetch(`${t.url}/plain/nothing-kept`);
    await r.arrayBuffer();
    await flushed(t.gw);
    await page.getByRole('link', { name: 'Wakes', exact: true }).click();
    await page.getByRole('link', { name: '/plain/nothing-kept' }).first().click();
    const note = page.locator('p.note', { hasText: 'This wake kept no detail' });
    await note.waitFor();
    expect(await note.textContent()).toContain('capture.detail.max_per_second');
    expect(await page.getByRole('heading', { name: 'Request' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Copy as curl' }).count()).toBe(0);
    // Nothing to replay: no Replay button that could only be refused.
    expect(await page.getByRole('button', { name: 'Replay' }).count()).toBe(0);
    await shot('wake-no-detail');
  });

  it('shows a body kept only as size and hash, and why', async () => {
    const r = await fetch(`${t.url}/api/items/xml`, {
      method: 'POST',
      headers: { ...bearer(appKey), 'content-type': 'application/xml' },
      body: '<login><password>never-shown-xml</password></login>',
    });
    await r.arrayBuffer();
    await flushed(t.gw);
    await page.getByRole('link', { name: 'Wakes', exact: true }).click();
    await page.getByRole('link', { name: '/api/items/xml' }).first().click();
    const note = page.locator('p', { hasText: 'Kept as its size and hash only' });
    await note.waitFor();
    expect(await note.textContent()).toContain('XML body');
    expect(await page.content()).not.toContain('never-shown-xml');
    expect(await page.locator('code', { hasText: /^[0-9a-f]{64}$/ }).count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Replay' }).count()).toBe(0);
    await shot('wake-omitted-body');
  });

  it('fits a path cut at 2,048 characters on the page: the title wraps, nothing runs off the side', async () => {
    // One word of 2,100 characters: no hyphen or slash a line could break at.
    const long = `/api/long/${'segment'.repeat(300)}`;
    const r = await fetch(`${t.url}${long}`, { headers: bearer(appKey) });
    await r.arrayBuffer();
    await flushed(t.gw);
    await page.getByRole('link', { name: 'Wakes', exact: true }).click();
    await page.locator('a', { hasText: '/api/long/segmentsegment' }).first().click();
    await page.locator('p.note', { hasText: 'its path was cut at 2,048 characters' }).waitFor();
    const overflow = (await page.evaluate(`({
      page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
      title: document.querySelector('h1').getBoundingClientRect().right - window.innerWidth,
    })`)) as { page: number; title: number };
    expect(overflow.page, 'the page is wider than the window').toBeLessThanOrEqual(0);
    expect(overflow.title, 'the title runs past the window').toBeLessThanOrEqual(0);
    await shot('wake-long-path');
    await page.getByRole('link', { name: 'Wakes', exact: true }).click();
    await page.locator('a', { hasText: '/api/long/segmentsegment' }).first().waitFor();
    const listOverflow = (await page.evaluate(
      'document.documentElement.scrollWidth - document.documentElement.clientWidth',
    )) as number;
    expect(listOverflow, 'the list is wider than the window').toBeLessThanOrEqual(0);
    // Its row shows the path's first lines, not all 2,048 characters.
    const row = page.locator('tr', { hasText: '/api/long/segmentsegment' }).first();
    expect((await row.boundingBox())?.height ?? 0).toBeLessThan(80);
    await shot('wakes-long-path');
  });

  it('creates a key and shows its secret once; its last use appears; it can be revoked', async () => {
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.getByLabel('Label').fill('console-made');
    await page.getByLabel('Scopes (comma-separated)').fill('payments:read');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = (await page.locator('.secret-value').textContent()) ?? '';
    expect(secret).toMatch(/^svc_live_[0-9A-Za-z]{43}$/);
    await shot('keys-created');
    await page.getByRole('button', { name: 'I have stored it' }).click();
    expect(await page.locator('.secret-value').count()).toBe(0);
    const row = page.locator('tr', { hasText: 'console-made' });
    expect(await row.locator('.last-used').textContent()).toBe('—');
    expect((await fetch(`${t.url}/api/items/1`, { headers: bearer(secret) })).status).toBe(200);
    await page.getByRole('link', { name: 'Overview' }).click();
    await page.getByRole('link', { name: 'Keys' }).click();
    await expect
      .poll(async () => row.locator('.last-used').textContent(), { timeout: 5000 })
      .toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
    // Revoke now asks first, naming the key; Cancel leaves it active.
    await row.getByRole('button', { name: 'Revoke now' }).click();
    const confirm = page.getByRole('alertdialog', { name: 'Confirm revocation' });
    await confirm.waitFor();
    expect(await confirm.textContent()).toContain('console-made');
    await shot('keys-confirm-revoke');
    await confirm.getByRole('button', { name: 'Cancel' }).click();
    expect((await fetch(`${t.url}/api/items/1`, { headers: bearer(secret) })).status).toBe(200);
    // Times are labelled with their zone, as on every page.
    expect(await row.getByRole('button', { name: 'Revoke at (UTC)' }).count()).toBe(1);
    await row.getByRole('button', { name: 'Revoke now' }).click();
    await confirm.getByRole('button', { name: 'Revoke console-made' }).click();
    await row.getByText('revoked').waitFor();
    await shot('keys');
    expect((await fetch(`${t.url}/api/items/1`, { headers: bearer(secret) })).status).toBe(401);
  });

  it('creates a key with its own rate limit (limit, burst, window), and the list shows each key its limit', async () => {
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.getByLabel('Label').fill('partner-bulk');
    await page.getByLabel('Scopes (comma-separated)').fill('payments:read');
    await page.getByLabel('Rate limit (requests)').fill('100000');
    await page.getByLabel('Burst', { exact: true }).fill('100000');
    await page.locator('form select[name="window"]').selectOption('minute');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = (await page.locator('.secret-value').textContent()) ?? '';
    expect(secret).toMatch(/^svc_live_/);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    // The bootstrap admin (no limit of its own) may issue any limit: the key holds what was asked.
    const listed = (await (
      await fetch(`${t.managementUrl}/v2/api-keys?consumer=partner-bulk`, { headers: bearer(t.admin) })
    ).json()) as { data: { rate_limit: unknown }[] };
    expect(listed.data[0]?.rate_limit).toEqual({ limit: 100_000, burst: 100_000, window: 'minute' });
    const row = page.locator('tr', { hasText: 'partner-bulk' });
    expect(await row.locator('.rate-limit').textContent()).toBe('100,000/minute, burst 100,000');
    // A key without its own limit is held to the default policy, and says so.
    const admin = page.locator('tr', { hasText: 'bootstrap admin' });
    expect(await admin.locator('.rate-limit').textContent()).toBe('default policy');
    // A limit with no burst given: the burst is the limit.
    await page.getByLabel('Label').fill('partner-small');
    await page.getByLabel('Scopes (comma-separated)').fill('payments:read');
    await page.getByLabel('Rate limit (requests)').fill('30');
    await page.locator('form select[name="window"]').selectOption('second');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('button', { name: 'I have stored it' }).click();
    await page
      .locator('tr', { hasText: 'partner-small' })
      .locator('.rate-limit')
      .getByText('30/second, burst 30')
      .waitFor();
    await shot('keys-rate-limit');
    // At a phone's width the form's fields stack within the page.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.locator('form.form').screenshot({ path: join(SHOTS, 'keys-rate-limit-phone.png') });
    const right = await page
      .locator('form.form label')
      .evaluateAll((ls) => Math.max(...ls.map((l) => l.getBoundingClientRect().right)));
    const formRight = await page.locator('form.form').evaluate((f) => f.getBoundingClientRect().right);
    expect(right).toBeLessThanOrEqual(formRight);
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  it("hides the gateway's own traffic unless asked, and a slow answer to an older filter never replaces a newer one", async () => {
    await page.getByRole('link', { name: 'Wakes', exact: true }).click();
    await page.locator('table.wakes tbody tr').first().waitFor();
    const routes = async () => page.locator('table.wakes tbody tr td:nth-child(7)').allTextContents();
    expect(await routes()).not.toContain('v2');
    await page.getByLabel("Show the gateway's own traffic").check();
    await expect.poll(routes, { timeout: 5000 }).toContain('v2');
    await page.getByLabel("Show the gateway's own traffic").uncheck();
    await expect.poll(routes, { timeout: 5000 }).not.toContain('v2');
    // An unfiltered list held back by the network arrives after the filtered one: it is dropped.
    let held: (() => void) | null = null;
    await page.route('**/v2/wakes?*', async (route) => {
      if (!/[?&]path=[^&]/.test(route.request().url())) {
        await new Promise<void>((r) => {
          held = r;
        });
      }
      await route.continue();
    });
    // A reload of the unfiltered list (showing the own traffic again), held back.
    await page.getByLabel("Show the gateway's own traffic").check();
    await expect.poll(() => held !== null, { timeout: 5000 }).toBe(true);
    await page.getByLabel('Path template').fill('/api/fail/*');
    const filtered = page.waitForResponse((r) => /[?&]path=[^&]/.test(r.url()), { timeout: 5000 });
    await page.getByRole('button', { name: 'Apply' }).click();
    await filtered;
    await page.locator('table.wakes tbody tr', { hasText: '/api/fail/' }).first().waitFor();
    (held as unknown as () => void)();
    await page.waitForResponse((r) => r.url().includes('/v2/wakes?') && !/[?&]path=[^&]/.test(r.url()), {
      timeout: 5000,
    });
    await new Promise((r) => setTimeout(r, 300));
    const paths = await page.locator('table.wakes tbody tr td:nth-child(4)').allTextContents();
    expect(paths.length).toBeGreaterThan(0);
    for (const p of paths) expect(p).toMatch(/^\/api\/fail\//);
    await page.unroute('**/v2/wakes?*');
    await page.getByLabel("Show the gateway's own traffic").uncheck();
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByRole('link', { name: 'Overview' }).click();
  });

  it('offers no action a key cannot take: no Add endpoint without webhooks:write, no Replay without wakes:write', async () => {
    const reader = (
      await t.gw.keys.create(
        { label: 'reader', environment: 'production', scopes: ['webhooks:read', 'keys:read', 'wakes:read'] },
        'production',
      )
    ).secret;
    const r = await fetch(`${t.url}/api/items/1`, { headers: bearer(appKey) });
    const wakeId = r.headers.get('x-wake-id') as string;
    await r.arrayBuffer();
    await flushed(t.gw);
    const p2 = await page.context().newPage();
    await p2.goto(`${t.managementUrl}/console/`);
    await p2.getByLabel('API key').fill(reader);
    await p2.getByRole('button', { name: 'Sign in' }).click();
    await p2.getByRole('link', { name: 'Webhooks' }).click();
    await p2.getByText('lacks webhooks:write').waitFor();
    expect(await p2.getByRole('button', { name: 'Add endpoint' }).count()).toBe(0);
    await p2.getByRole('link', { name: 'Keys' }).click();
    await p2.getByText('lacks keys:write').waitFor();
    expect(await p2.getByRole('button', { name: 'Create key' }).count()).toBe(0);
    expect(await p2.getByRole('button', { name: 'Revoke now' }).count()).toBe(0);
    await p2.screenshot({ path: join(SHOTS, 'keys-read-only.png'), fullPage: true });
    // POST /v2/wakes/{id}/replay needs wakes:write: a wake is shown, and copied as curl, but not offered for replay.
    await p2.goto(`${t.managementUrl}/console/#/wakes/${wakeId}`);
    await p2.getByRole('button', { name: 'Copy as curl' }).waitFor();
    await p2.getByText('lacks wakes:write').waitFor();
    expect(await p2.getByRole('button', { name: 'Replay', exact: true }).count()).toBe(0);
    expect(await p2.getByLabel('Ignore').count()).toBe(0);
    await p2.screenshot({ path: join(SHOTS, 'wake-read-only.png'), fullPage: true });
    await p2.close();
  });

  it('shows a failing endpoint dead-lettered, replays it, and sees the new delivery delivered', async () => {
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByLabel('URL').fill(receiver.url);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    expect(await page.locator('.secret-value').textContent()).toMatch(/^whsec_/);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    await page.getByRole('button', { name: 'Send test' }).click();
    const dead = page.locator('tr[data-delivery]', { hasText: 'dead lettered' }).first();
    await dead.waitFor({ timeout: 10_000 });
    await dead.getByRole('button', { name: 'Attempts' }).click();
    await page.getByText('receiver down').waitFor();
    receiver.answer = (_req, res) => res.end('ok');
    await dead.getByRole('button', { name: 'Replay' }).click();
    await page
      .locator('tr[data-delivery]', { hasText: 'replay' })
      .filter({ hasText: 'delivered' })
      .first()
      .waitFor({ timeout: 10_000 });
    // The delivery just replayed is superseded: it names its replay and offers no second Replay.
    await dead.getByText('replayed as').waitFor({ timeout: 5000 });
    expect(await dead.getByRole('button', { name: 'Replay' }).count()).toBe(0);
    await shot('webhooks');
  });

  it('returns to sign-in, saying why, when the signed-in key is revoked mid-session', async () => {
    const doomed = await t.gw.keys.create(
      { label: 'doomed', environment: 'production', scopes: ['wakes:read', 'keys:read'] },
      'production',
    );
    const p2 = await page.context().newPage();
    await p2.goto(`${t.managementUrl}/console/#/keys`);
    await p2.getByLabel('API key').fill(doomed.secret);
    await p2.getByRole('button', { name: 'Sign in' }).click();
    await p2.getByRole('heading', { name: 'Keys', exact: true }).first().waitFor();
    // The Keys page lists keys after its heading shows (twice: once more when the environment is chosen).
    // A list call that reached the gateway after the revocation below would end the session on this
    // page, with no Wakes link to click (what timed out once on a loaded CI machine): revoke once the
    // page's own calls are answered.
    await p2.getByRole('cell', { name: 'doomed' }).first().waitFor({ timeout: 10_000 });
    await p2.waitForLoadState('networkidle', { timeout: 10_000 });
    // Revoked elsewhere (another operator, the API): the next page the console loads answers 401 key_revoked.
    const r = await fetch(`${t.url}/v2/api-keys/${doomed.key.id}`, { method: 'DELETE', headers: bearer(t.admin) });
    expect(r.status).toBe(200);
    await p2.getByRole('link', { name: 'Wakes' }).click({ timeout: 10_000 });
    await p2.getByLabel('API key').waitFor({ timeout: 5000 });
    await p2.getByText(/This key was revoked/).waitFor({ timeout: 5000 });
    expect(await p2.evaluate('sessionStorage.getItem("wakegate.key")')).toBeNull();
    expect(await p2.getByRole('button', { name: 'Sign out' }).count()).toBe(0);
    await p2.screenshot({ path: '/tmp/review-console-revoked.png', fullPage: true });
    // Signing in again with another key carries on where the page was.
    await p2.getByLabel('API key').fill(t.admin);
    await p2.getByRole('button', { name: 'Sign in' }).click();
    await p2.getByRole('heading', { name: 'Wakes', exact: true }).first().waitFor({ timeout: 10_000 });
    expect(await p2.getByText(/This key was revoked/).count()).toBe(0);
    await p2.close();
  });

  it('works at a phone width, switches environment, and signs out', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole('link', { name: 'Wakes' }).click();
    // The console's own calls are wakes too (route v2): a path filter finds the app's requests.
    await page.getByLabel('Path template').fill('/api/items/{id}');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByRole('link', { name: '/api/items/42' }).first().waitFor({ timeout: 5000 });
    expect(await page.locator('table.wakes tbody tr').count()).toBeGreaterThan(5);
    await shot('wakes-phone');
    await page.setViewportSize({ width: 1280, height: 860 });
    await page.getByRole('combobox', { name: /Environment/ }).selectOption('sandbox');
    await page.getByText('No wakes match.').waitFor({ timeout: 5000 });
    await page.getByRole('combobox', { name: /Environment/ }).selectOption('production');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor({ timeout: 5000 });
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    expect(foreign).toEqual([]);
  });
});
