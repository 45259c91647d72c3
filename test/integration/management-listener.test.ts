import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, startGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

/** Issue #25, item 9: the console (and the /v2 it calls) never share an origin with a proxied app. */
describe('where management is served', () => {
  let origin: TestServer;

  beforeAll(async () => {
    origin = await echoOrigin('app');
  });
  afterAll(async () => {
    await origin.close();
  });

  it('by default: console and /v2 on the ops listener, /v2 also on the main one, the console never there', async () => {
    const t = await startGateway({
      routes: [{ name: 'app', prefix: '/', auth: 'none', origins: { production: origin.url } }],
    });
    try {
      const c = await fetch(`${t.opsUrl}/console/`);
      expect(c.status).toBe(200);
      expect(c.headers.get('content-security-policy')).toContain("default-src 'self'");
      const html = await c.text();
      expect(html).toContain(`<meta name="wakegate-proxy-port" content="${new URL(t.url).port}">`);
      // On the main listener /console is the app's own path: proxied like any other.
      const onMain = await fetch(`${t.url}/console/`);
      expect(((await onMain.json()) as { tag: string }).tag).toBe('app');
      // /v2 answers on both; the ops listener proxies nothing.
      expect((await fetch(`${t.opsUrl}/v2/api-keys`, { headers: bearer(t.admin) })).status).toBe(200);
      expect((await fetch(`${t.url}/v2/api-keys`, { headers: bearer(t.admin) })).status).toBe(200);
      const other = await fetch(`${t.opsUrl}/anything`);
      expect(other.status).toBe(404);
      expect(((await other.json()) as { error: { type: string } }).error.type).toBe('resource_missing');
      expect((await fetch(`${t.opsUrl}/metrics`)).status).toBe(200);
    } finally {
      await t.cleanup();
    }
  });

  it('management.on_main: false gives every path, /v2 included, to the origin (drop-in); a separate listener serves management', async () => {
    const t = await startGateway({
      routes: [{ name: 'app', prefix: '/', auth: 'none', origins: { production: origin.url } }],
      management: { listener: 'separate', host: '127.0.0.1', port: 0, on_main: false },
    });
    try {
      const proxied = await fetch(`${t.url}/v2/api-keys`, { headers: bearer(t.admin) });
      expect(((await proxied.json()) as { tag: string; url: string }).url).toBe('/v2/api-keys');
      expect(t.managementUrl).not.toBe(t.opsUrl);
      expect((await fetch(`${t.managementUrl}/v2/api-keys`, { headers: bearer(t.admin) })).status).toBe(200);
      expect((await fetch(`${t.managementUrl}/console/`)).status).toBe(200);
      // The ops listener keeps only its own paths then.
      expect((await fetch(`${t.opsUrl}/console/`)).status).toBe(404);
    } finally {
      await t.cleanup();
    }
  });
});
