// Regression tests from a review of the console as an attacker (2026-11-27).
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/** Screenshots of the pages that refuse a copy (for a person to look at). */
const SHOTS = process.env.SCREENSHOTS_DIR ?? mkdtempSync(join(tmpdir(), 'wakegate-curl-'));
mkdirSync(SHOTS, { recursive: true });

/**
 * "Copy as curl" for a wake whose request was not kept whole sent a DIFFERENT request,
 * and said nothing about it:
 *
 *  - a body cut at capture.detail.max_body_bytes (`body_truncated: true`) was pasted
 *    into `--data-raw` as if it were the whole body (a form value cut in the middle:
 *    `amount=1000000` became `amount=10`);
 *  - a body kept as base64 (a gzip-compressed JSON body, "kept compressed as it was
 *    sent (base64)", docs/capture.md) was left out, while its `Content-Encoding: gzip`
 *    and `-X POST` were kept: the origin got an empty gzip-labelled POST;
 *  - a path cut at 2048 characters (`path_truncated: true`) was used as the URL.
 *
 * The replay API refuses the first and the last (409: "the path cut, the body not
 * captured whole", POST /v2/wakes/{wake_id}/replay) and sends a base64 body's bytes as
 * they are. The console now does the same: a wake whose path was cut or whose body was
 * not kept whole gets no Copy as curl (nor Replay), and a note on the page says why; a
 * base64 body is sent byte for byte (printf into `curl --data-binary @-`), unless it
 * holds redacted values (inside its compressed bytes), which no pasted command can fill:
 * then no Copy either, and the note says so.
 *
 * Each command is run in bash against the gateway, and what the origin receives is
 * compared with what the client sent.
 */
describe('console: Copy as curl for a wake whose request was not kept whole', () => {
  let origin: TestServer;
  let t: TestGateway;
  let browser: Browser;
  let page: Page;
  /** What the origin received, by the x-probe header the request carried. */
  const seen = new Map<string, { url: string; body: Buffer; headers: Record<string, unknown> }>();

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const probe = String(req.headers['x-probe'] ?? '');
        seen.set(probe, { url: req.url ?? '', body: Buffer.concat(chunks), headers: { ...req.headers } });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/', auth: 'none', origins: { production: origin.url } }],
    });
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run'],
    });
    const ctx = await browser.newContext();
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write']);
    page = await ctx.newPage();
    await page.goto(`${t.managementUrl}/console/`);
    await page.getByLabel('API key').fill(t.admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.cleanup();
    await origin?.close();
  });

  /** The console's Copy as curl text for a wake. */
  async function copied(id: string): Promise<string> {
    await page.goto(`${t.managementUrl}/console/#/wakes/${id}`);
    await page.getByRole('heading', { name: 'Request' }).waitFor();
    await page.getByRole('button', { name: 'Copy as curl' }).click();
    return (await page.evaluate('navigator.clipboard.readText()')) as string;
  }

  /** Runs the copied text in bash (as pasted), and returns what the origin got for `probe`. */
  async function run(text: string, probe: string) {
    seen.delete(probe);
    // Asynchronously: the gateway runs in this process and must answer the command.
    const code = await new Promise<number>((resolve) =>
      execFile('/usr/bin/bash', ['-c', text], { timeout: 10_000 }, (e) => resolve(e ? Number(e.code ?? 1) : 0)),
    );
    expect(code).toBe(0);
    return seen.get(probe);
  }

  /** The page of a wake whose request is not copied: no Copy as curl, no Replay, and the note saying why. */
  async function refused(id: string, shot: string): Promise<string> {
    await page.evaluate('navigator.clipboard.writeText("")');
    await page.goto(`${t.managementUrl}/console/#/wakes/${id}`);
    await page.getByRole('heading', { name: 'Request' }).waitFor();
    const note = page.locator('p.not-whole');
    await note.waitFor();
    expect(await page.getByRole('button', { name: 'Copy as curl' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Replay' }).count()).toBe(0);
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe('');
    await page.screenshot({ path: `${SHOTS}/${shot}.png`, fullPage: false });
    return (await note.textContent()) ?? '';
  }

  it('a body cut at max_body_bytes is not offered as a command, and the page says why', async () => {
    // A form whose last value lies past the 32768 bytes kept: the cut falls inside `amount`.
    const body = `note=${'x'.repeat(32_768 - 'note=&amount=10'.length)}&amount=1000000`;
    const r = await fetch(`${t.url}/transfer`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-probe': 'cut' },
      body,
    });
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const w = (await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json()) as {
      request: { body_truncated: boolean };
    };
    expect(w.request.body_truncated).toBe(true);
    const note = await refused(id, 'wake-body-cut');
    expect(note).toContain('No Copy as curl or Replay');
    expect(note).toContain('cut at capture.detail.max_body_bytes: only the first 32,768 of 32,773 bytes were kept');
    // As the API says for the same wake.
    const replay = await fetch(`${t.url}/v2/wakes/${id}/replay`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ allow_unsafe: true }),
    });
    expect(replay.status).toBe(409);
  });

  it('a body kept as base64 (sent gzip-compressed) is sent byte for byte', async () => {
    const json = JSON.stringify({ order: 42, items: ['a', 'b'] });
    const gz = gzipSync(json);
    const r = await fetch(`${t.url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-probe': 'gz' },
      body: gz,
    });
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const w = (await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json()) as {
      request: { body_encoding: string };
    };
    expect(w.request.body_encoding).toBe('base64');
    const text = await copied(id);
    // Only ASCII is pasted, and one pipeline: printf into curl.
    expect(text).toMatch(/^printf '[^'\n]*' \| curl -g -X POST /);
    expect(text).not.toMatch(/[^\x20-\x7e]/);
    const got = await run(text, 'gz');
    expect(got?.headers['content-encoding']).toBe('gzip');
    expect(got?.body.toString('hex'), text).toBe(gz.toString('hex'));
  });

  it('a gzip body holding redacted values is not offered as a command (its markers would be sent as values)', async () => {
    const gz = gzipSync(JSON.stringify({ user: 'ann', password: 'hunter2-never-shown' }));
    const r = await fetch(`${t.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-probe': 'gz-redacted' },
      body: gz,
    });
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const w = (await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json()) as {
      request: { body_encoding: string; body: string };
    };
    expect(w.request.body_encoding).toBe('base64');
    expect(gunzipSync(Buffer.from(w.request.body, 'base64')).toString()).toMatch(/\[redacted:[0-9a-f]{12}\]/);
    await page.goto(`${t.managementUrl}/console/#/wakes/${id}`);
    const note = page.locator('p.not-whole');
    await note.waitFor();
    expect(await note.textContent()).toContain('holds redacted values inside its gzip-compressed bytes');
    expect(await page.getByRole('button', { name: 'Copy as curl' }).count()).toBe(0);
    await page.screenshot({ path: `${SHOTS}/wake-gzip-redacted.png` });
  });

  it('a path cut at 2048 characters is not offered as a command, and the page says why', async () => {
    const path = `/files/${'a'.repeat(2100)}/end`;
    const r = await fetch(`${t.url}${path}`, { headers: { 'x-probe': 'longpath' } });
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const w = (await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json()) as {
      path_truncated: boolean;
    };
    expect(w.path_truncated).toBe(true);
    const note = await refused(id, 'wake-path-cut');
    expect(note).toContain('its path was cut at 2,048 characters');
    const replay = await fetch(`${t.url}/v2/wakes/${id}/replay`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: '{}',
    });
    expect(replay.status).toBe(409);
  });

  it('a whole request is still copied, and sends what the client sent', async () => {
    const body = 'note=short&amount=1000000';
    const r = await fetch(`${t.url}/transfer`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-probe': 'whole' },
      body,
    });
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const text = await copied(id);
    expect(await page.locator('p.not-whole').count()).toBe(0);
    const got = await run(text, 'whole');
    expect(got?.url).toBe('/transfer');
    expect(got?.body.toString()).toBe(body);
  });
});
