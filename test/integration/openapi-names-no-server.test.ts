// Regression tests from a review of isolation between environments and scopes (2026-11-27).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenerServer } from '../../src/api/openapi.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * DESIGN (Console and where management is served): "`/v2/openapi.json` names the server
 * it was served from." buildOpenApi (src/api/openapi.ts:104-112) returns no `servers`
 * at all, and one cached document (openapi.ts:120) is served on every listener.
 */
describe('/v2/openapi.json names the listener it was served from', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({});
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it('the main listener and the management listener each name themselves in servers', async () => {
    for (const base of [t.url, t.managementUrl]) {
      const r = await fetch(`${base}/v2/openapi.json`);
      expect(r.status).toBe(200);
      const doc = (await r.json()) as { servers?: { url: string }[] };
      expect(
        (doc.servers ?? []).map((s) => s.url.replace(/\/+$/, '')),
        base,
      ).toContain(base);
    }
  });
});

describe('/v2/openapi.json names its listener by the configured address, never by what a request says', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({ management: { listener: 'separate', host: '127.0.0.1', port: 0 } });
  });
  afterAll(async () => {
    await t.cleanup();
  });

  const servers = async (base: string, headers: Record<string, string> = {}) => {
    const r = await fetch(`${base}/v2/openapi.json`, { headers });
    expect(r.status).toBe(200);
    return ((await r.json()) as { servers?: { url: string; description: string }[] }).servers;
  };

  it('a separate management listener names itself; a Host or X-Forwarded-Host header changes nothing', async () => {
    const m = await servers(t.managementUrl);
    expect(m).toEqual([{ url: t.managementUrl, description: 'the management listener' }]);
    expect(await servers(t.managementUrl, { host: 'evil.example', 'x-forwarded-host': 'evil.example' })).toEqual(m);
    const main = await servers(t.url, {
      host: 'evil.example',
      'x-forwarded-host': 'evil.example',
      'x-forwarded-proto': 'https',
    });
    expect(main).toEqual([{ url: t.url, description: 'the main listener' }]);
  });
});

describe('behind a trusted proxy the document names the address it was fetched from', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({ server: { trusted_proxies: ['127.0.0.1'] } });
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it('servers is relative (/), whatever X-Forwarded-Host says', async () => {
    for (const base of [t.url, t.managementUrl]) {
      const r = await fetch(`${base}/v2/openapi.json`, { headers: { 'x-forwarded-host': 'evil.example' } });
      const doc = (await r.json()) as { servers: { url: string }[] };
      expect(doc.servers.map((s) => s.url)).toEqual(['/']);
    }
  });
});

describe('listenerServer', () => {
  it('the configured host and port, https with TLS; a wildcard bind or a trusted proxy: relative', () => {
    const l = { name: 'main', tls: false, host: '127.0.0.1', port: 8080 } as const;
    expect(listenerServer(l, false).url).toBe('http://127.0.0.1:8080');
    expect(listenerServer({ ...l, tls: true, port: 443 }, false).url).toBe('https://127.0.0.1');
    expect(listenerServer({ ...l, host: '::1' }, false).url).toBe('http://[::1]:8080');
    expect(listenerServer({ ...l, host: 'gw.internal' }, false).url).toBe('http://gw.internal:8080');
    for (const host of ['0.0.0.0', '::', '[::]', '0:0:0:0:0:0:0:0', ''])
      expect(listenerServer({ ...l, host }, false).url, host).toBe('/');
    expect(listenerServer(l, true).url).toBe('/');
    expect(listenerServer({ ...l, name: 'ops' }, false).description).toBe('the ops listener');
  });
});
