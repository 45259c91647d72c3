// Regression tests from a review of the console as an attacker (2026-11-27).
import { execFile } from 'node:child_process';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange } from '../helpers/raw.js';

/**
 * "Copy as curl" wrote a header value holding bytes outside ASCII (UTF-8 text such as
 * `café` or `東京`, common in X-User-Name, Content-Disposition or a User-Agent) as
 * other bytes. The API gives header values as Node reads them, one character per byte
 * (latin1: `café` is "cafÃ©"); the console wrote those characters into the command as
 * UTF-8, each byte >= 0x80 becoming two, so running the command sent a header the
 * client never sent. (A replay through the API re-sends the bytes right.)
 *
 * The command now sends the bytes the client sent: bytes that are UTF-8 text are
 * written as that text (its UTF-8 is those bytes), any other byte >= 0x80 as
 * `"$(printf '\ooo')"`, as control characters already were.
 */
describe('console: Copy as curl of a header holding non-ASCII bytes', () => {
  let origin: TestServer;
  let t: TestGateway;
  let browser: Browser;
  let page: Page;
  /** The raw bytes of x-note the origin received, by the x-probe header. */
  const seen = new Map<string, Buffer>();

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const raw = req.rawHeaders;
      let note: Buffer | null = null;
      let probe = '';
      for (let i = 0; i < raw.length; i += 2) {
        const name = (raw[i] as string).toLowerCase();
        // Node gives header values one character per byte (latin1): back to the bytes.
        if (name === 'x-note') note = Buffer.from(raw[i + 1] as string, 'latin1');
        if (name === 'x-probe') probe = raw[i + 1] as string;
      }
      if (note) seen.set(probe, note);
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('ok');
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

  /** Sends `note` as X-Note's bytes, copies the wake as curl, runs it in bash: the bytes the origin got, and the command. */
  async function roundTrip(note: Buffer, probe: string) {
    const port = Number(new URL(t.url).port);
    const head = Buffer.concat([
      Buffer.from(`GET /profile HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Probe: ${probe}\r\nX-Note: `),
      note,
      Buffer.from('\r\nConnection: close\r\n\r\n'),
    ]);
    const r = await rawExchange(port, head);
    const id = /x-wake-id: (wk_\w+)/i.exec(r.text)?.[1] as string;
    expect(id).toMatch(/^wk_/);
    // What the client sent reached the origin as sent.
    expect(seen.get(probe)?.equals(note)).toBe(true);
    await flushed(t.gw);

    await page.goto(`${t.managementUrl}/console/#/wakes/${id}`);
    await page.getByRole('heading', { name: 'Request' }).waitFor();
    await page.getByRole('button', { name: 'Copy as curl' }).click();
    const text = ((await page.evaluate('navigator.clipboard.readText()')) as string).replace(
      new RegExp(`'x-probe: ${probe}'`, 'i'),
      `'X-Probe: ${probe}-copied'`,
    );
    expect(text).toContain(`'X-Probe: ${probe}-copied'`);
    const code = await new Promise<number>((resolve) =>
      execFile('/usr/bin/bash', ['-c', text], { timeout: 10_000 }, (e) => resolve(e ? Number(e.code ?? 1) : 0)),
    );
    expect(code).toBe(0);
    return { got: seen.get(`${probe}-copied`), text };
  }

  it('running the copied command sends the header bytes the client sent (UTF-8 text, written as text)', async () => {
    const note = Buffer.from('café 東京', 'utf8');
    const { got, text } = await roundTrip(note, 'utf8');
    expect(got?.toString('hex'), `copied command: ${text}`).toBe(note.toString('hex'));
    // Readable: the text as the client wrote it.
    expect(text).toContain("'X-Note: café 東京'");
  });

  it('bytes that are not UTF-8 (latin1, a C1 byte) are sent as those bytes, and pasted as ASCII', async () => {
    const note = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0x9b, 0x80, 0x20, 0x27, 0x3b, 0x78]);
    const { got, text } = await roundTrip(note, 'latin1');
    expect(got?.toString('hex'), `copied command: ${text}`).toBe(note.toString('hex'));
    const line = text.split(' -H ').find((p) => p.includes('X-Note')) ?? '';
    expect(line).not.toMatch(/[^\x20-\x7e]/);
  });
});
