import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2connect, h2once, h2request } from '../helpers/h2.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

describe('HTTP/2 (h2c with prior knowledge) through the proxy', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await echoOrigin('prod');
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('serves a stream through the real proxy, :authority becoming Host', async () => {
    const r = await h2once(t.url, { ':path': '/open/a?x=1', 'x-a': '1' });
    expect(r.status).toBe(200);
    const echo = JSON.parse(r.text);
    expect(echo.url).toBe('/open/a?x=1');
    expect(echo.rawHeaders).toContain('x-a');
    expect(r.headers['x-wake-id']).toMatch(/^wk_/);
  });

  it('still serves HTTP/1.1 on the same listener', async () => {
    const r = await fetch(`${t.url}/open/h1`);
    expect(r.status).toBe(200);
    expect((await r.json()).url).toBe('/open/h1');
  });
});
