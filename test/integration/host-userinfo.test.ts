import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/**
 * RFC 9110 §7.2: Host is uri-host and port only. Userinfo in it (`user:pass@host`) is
 * refused over HTTP/1.1 as over HTTP/2 (h2-authority.test.ts): it would reach the origin
 * as X-Forwarded-Host, credentials and all.
 */
describe('HTTP/1.1: a Host holding userinfo', () => {
  let origin: TestServer;
  let t: TestGateway;
  const seen: string[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      seen.push(JSON.stringify(req.headers));
      res.end('ok');
    });
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/', auth: 'none', origins: { production: origin.url } }],
    });
  }, 60_000);
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it('is refused (400 invalid_request, param host) and the origin sees nothing', async () => {
    const port = Number(new URL(t.url).port);
    for (const host of ['user:secretpw@localhost', 'user@localhost:8080', '@localhost']) {
      seen.length = 0;
      const r = await rawExchange(port, `GET /x HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      expect(statusOf(r.text)).toBe(400);
      const body = JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4)) as {
        error: { type: string; param: string };
      };
      expect(body.error).toMatchObject({ type: 'invalid_request', param: 'host' });
      expect(seen).toEqual([]);
    }
  });

  it('a second Host line is refused (RFC 9112 section 3.2), so no Host line the check did not see reaches the origin', async () => {
    const port = Number(new URL(t.url).port);
    seen.length = 0;
    const r = await rawExchange(
      port,
      'GET /x HTTP/1.1\r\nHost: localhost\r\nHost: user:secretpw@localhost\r\nConnection: close\r\n\r\n',
    );
    expect(statusOf(r.text)).toBe(400);
    expect(r.text).toContain('"param":"host"');
    expect(seen).toEqual([]);
    const twice = await rawExchange(port, 'GET /x HTTP/1.1\r\nHost: a\r\nHost: a\r\nConnection: close\r\n\r\n');
    expect(statusOf(twice.text)).toBe(400);
  });

  it('a plain Host, with or without a port, is served', async () => {
    const port = Number(new URL(t.url).port);
    for (const host of ['localhost', 'localhost:8080', '[::1]:8080', 'example.com']) {
      const r = await rawExchange(port, `GET /x HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      expect(statusOf(r.text)).toBe(200);
    }
  });
});
