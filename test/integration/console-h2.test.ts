import { createHash, X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SHOTS = process.env.SCREENSHOTS_DIR ?? mkdtempSync(join(tmpdir(), 'wakegate-console-h2-'));
mkdirSync(SHOTS, { recursive: true });

/** The console in a real headless Chromium over HTTP/2 and TLS (server.ops_tls), a test CA's certificate. */
describe('the console over HTTP/2 and TLS, in a real headless Chromium', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let browser: Browser;

  beforeAll(async () => {
    certs = makeCerts();
    origin = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    t = await startGateway({
      server: { ops_tls: { certificates: [{ cert: certs.server.cert, key: certs.server.key }] } },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      tracing: { trace_url: 'https://jaeger.test/trace/{trace_id}' },
    });
    for (let i = 0; i < 5; i++) await fetch(`${t.url}/open/items/${i}`);
    await flushed(t.gw);
    // Chromium trusts the test certificate by its public key (the test CA is in no system store).
    const spki = createHash('sha256')
      .update(new X509Certificate(certs.server.certPem).publicKey.export({ type: 'spki', format: 'der' }))
      .digest('base64');
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
        `--ignore-certificate-errors-spki-list=${spki}`,
      ],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.cleanup();
    await origin?.close();
    certs?.cleanup();
  });

  it('loads over h2, signs in, and lists the wakes through /v2 on the same connection', async () => {
    const base = t.opsUrl.replace('http://127.0.0.1', 'https://localhost');
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
    await page.goto(`${base}/console/`);
    await page.getByLabel('API key').waitFor();
    const nav = (await page.evaluate("performance.getEntriesByType('navigation')[0].nextHopProtocol")) as string;
    expect(nav).toBe('h2');
    await page.getByLabel('API key').fill(t.admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByRole('link', { name: 'Wakes' }).click();
    await page.getByRole('link', { name: '/open/items/4' }).first().waitFor({ timeout: 10_000 });
    // Every resource and /v2 call of the page went over HTTP/2.
    const used = (await page.evaluate(
      "performance.getEntriesByType('resource').map((e) => e.nextHopProtocol)",
    )) as string[];
    expect(used.length).toBeGreaterThan(0);
    expect(new Set(used)).toEqual(new Set(['h2']));
    await page.screenshot({ path: join(SHOTS, 'console-h2-wakes.png'), fullPage: true });
    // A wake of a traced request shows its trace, linked to tracing.trace_url.
    const traced = await fetch(`${t.url}/open/traced`, { headers: { traceparent: `00-${TRACE}-00f067aa0ba902b7-01` } });
    await flushed(t.gw);
    await page.goto(`${base}/console/#/wakes/${traced.headers.get('x-wake-id')}`);
    const link = page.getByRole('link', { name: TRACE });
    await link.waitFor({ timeout: 10_000 });
    expect(await link.getAttribute('href')).toBe(`https://jaeger.test/trace/${TRACE}`);
    // The proxied request came over HTTP/1.1: no protocol line.
    expect(await page.getByText('Protocol', { exact: true }).count()).toBe(0);
    await page.screenshot({ path: join(SHOTS, 'console-h2-trace.png'), fullPage: true });
    // The wake of that page load says h2 too (GET /v2/wakes over HTTP/1.1 here, from Node).
    await flushed(t.gw);
    const r = await fetch(`${t.url}/v2/wakes?route=console&limit=5`, { headers: bearer(t.admin) });
    const wakes = (await r.json()) as { data: { id: string; protocol: string }[] };
    const h2 = wakes.data.find((w) => w.protocol === 'h2');
    expect(h2).toBeDefined();
    await page.goto(`${base}/console/#/wakes/${h2?.id}`);
    await page.getByText('Protocol', { exact: true }).waitFor({ timeout: 10_000 });
    expect(await page.locator('dt:has-text("Protocol") + dd').textContent()).toBe('h2');
  });
});
