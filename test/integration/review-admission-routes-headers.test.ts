import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/** The origin's echo: the headers it received, by lower-case name (repeated ones joined). */
function heard(text: string): { url: string; method: string; h: Record<string, string> } {
  const rest = text.slice(text.indexOf('\r\n\r\n') + 4);
  const body = JSON.parse(rest.slice(rest.indexOf('{'), rest.lastIndexOf('}') + 1)) as {
    url: string;
    method: string;
    rawHeaders: string[];
  };
  const h: Record<string, string> = {};
  for (let i = 0; i < body.rawHeaders.length; i += 2) {
    const n = (body.rawHeaders[i] as string).toLowerCase();
    h[n] = h[n] === undefined ? (body.rawHeaders[i + 1] as string) : `${h[n]}, ${body.rawHeaders[i + 1]}`;
  }
  return { url: body.url, method: body.method, h };
}

// Regression and coverage tests from a review of admission and forwarded headers (the defects' tests failed before their fixes).
describe('review: routes and forwarded headers', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port = 0;
  let reader = '';
  let writer = '';
  let sandbox = '';

  beforeAll(async () => {
    origin = await echoOrigin();
    t = await startGateway({
      server: { trusted_proxies: ['10.0.0.0/8'] },
      routes: [
        { name: 'public', prefix: '/', auth: 'none', origins: { production: origin.url } },
        {
          name: 'payments',
          prefix: '/v2/payments',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url },
        },
        {
          name: 'prod-only',
          prefix: '/prod',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url },
        },
      ],
    });
    port = Number(new URL(t.url).port);
    reader = (
      await t.gw.keys.create({ label: 'reader', environment: 'production', scopes: ['payments:read'] }, 'production')
    ).secret;
    writer = (
      await t.gw.keys.create(
        { label: 'writer', environment: 'production', scopes: ['payments:read', 'payments:write'] },
        'production',
      )
    ).secret;
    sandbox = (
      await t.gw.keys.create(
        { label: 'sb', environment: 'sandbox', scopes: ['payments:read', 'payments:write'] },
        'sandbox',
      )
    ).secret;
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const raw = (lines: string[]) => rawExchange(port, `${lines.join('\r\n')}\r\n\r\n`);

  it('keyed prefix edges: /v2/paymentsX is public, the rest keyed or refused', async () => {
    const status = async (path: string) => {
      const r = await fetch(`${t.url}${path}`);
      await r.arrayBuffer();
      return r.status;
    };
    expect(await status('/v2/paymentsx')).toBe(200);
    expect(await status('/v2/payments')).toBe(401);
    expect(await status('/v2/payments/')).toBe(401);
    expect(await status('/v2/payments?')).toBe(401);
    expect(await status('/v2/payments/x?y=1')).toBe(401);
    for (const p of [
      '/V2/payments/x',
      '//v2/payments/x',
      '/v2//payments/x',
      '/v2/pa%79ments/x',
      '/v2/payments;a/x',
      '/v2/x/../payments/x',
      '/v2/x/%2e%2e/payments/x',
      '/v2/x%2f..%2fpayments/x',
    ]) {
      const r = await raw([`GET ${p} HTTP/1.1`, 'Host: a', 'Connection: close']);
      expect([p, statusOf(r.text)]).toEqual([p, 400]);
    }
  });

  it('a sandbox key on a production-only route is 404, never forwarded', async () => {
    const r = await fetch(`${t.url}/prod/x`, { headers: bearer(sandbox) });
    expect(r.status).toBe(404);
  });

  it('scopes by method: HEAD/OPTIONS read, unknown methods and overrides write', async () => {
    const st = async (method: string, secret: string, extra: string[] = []) =>
      statusOf(
        (
          await raw([
            `${method} /v2/payments/x HTTP/1.1`,
            'Host: a',
            `Authorization: Bearer ${secret}`,
            ...extra,
            'Connection: close',
          ])
        ).text,
      );
    expect(await st('HEAD', reader)).toBe(200);
    expect(await st('OPTIONS', reader)).toBe(200);
    expect(await st('PROPFIND', reader)).toBe(403);
    expect(await st('DELETE', reader)).toBe(403);
    expect(await st('GET', reader, ['X-HTTP-Method-Override: delete'])).toBe(403);
    expect(await st('GET', reader, ['X_Http_Method_Override: PUT'])).toBe(403);
    expect(await st('GET', reader, ['X-HTTP-Method-Override: GET', 'X-HTTP-Method-Override: PATCH'])).toBe(403);
    expect(await st('DELETE', writer)).toBe(200);
  });

  it('bearer spellings: lowercase scheme and extra spaces work; a key in a cookie or query never passes', async () => {
    const st = async (auth: string) =>
      statusOf(
        (await raw(['GET /v2/payments/x HTTP/1.1', 'Host: a', `Authorization: ${auth}`, 'Connection: close'])).text,
      );
    expect(await st(`bearer ${reader}`)).toBe(200);
    expect(await st(`Bearer   ${reader}`)).toBe(200);
    expect(await st(`Basic ${reader}`)).toBe(401);
    const q = await raw([`GET /v2/payments/x?api_key=${reader} HTTP/1.1`, 'Host: a', 'Connection: close']);
    expect(statusOf(q.text)).toBe(400);
    const c = await raw(['GET /v2/payments/x HTTP/1.1', 'Host: a', `Cookie: key=${reader}`, 'Connection: close']);
    expect(statusOf(c.text)).toBe(401);
  });

  it('spoofed identity and forwarding headers never reach the origin', async () => {
    const r = await raw([
      'GET /v2/payments/x HTTP/1.1',
      'Host: a',
      `Authorization: Bearer ${reader}`,
      'X-Wakegate-Consumer: admin',
      'X-Wakegate-Key-Id: key_admin',
      'x-wakegate-environment: production',
      'X_Wakegate_Consumer: admin2',
      'X-Forwarded-For: 1.2.3.4',
      'Forwarded: for=1.2.3.4',
      'Connection: close, X-Custom',
      'X-Custom: hop',
      'Keep-Alive: timeout=5',
    ]);
    expect(statusOf(r.text)).toBe(200);
    const { h } = heard(r.text);
    expect(h['x-wakegate-consumer']).toBe('reader');
    expect(h['x-wakegate-key-id']).toMatch(/^key_/);
    expect(h['x-wakegate-key-id']).not.toBe('key_admin');
    expect(h['x-wakegate-environment']).toBe('production');
    expect(h.x_wakegate_consumer).toBeUndefined();
    expect(h['x-forwarded-for']).toBe('127.0.0.1');
    expect(h.forwarded).toBeUndefined();
    expect(h['x-custom']).toBeUndefined();
    expect(h['keep-alive']).toBeUndefined();
    expect(h.authorization).toBeUndefined();
  });

  it('an auth: none route strips client x-wakegate-* too', async () => {
    const r = await raw(['GET /open HTTP/1.1', 'Host: a', 'X-Wakegate-Consumer: admin', 'Connection: close']);
    expect(statusOf(r.text)).toBe(200);
    const { h } = heard(r.text);
    expect(h['x-wakegate-consumer']).toBeUndefined();
  });

  it('held up: the double encodings the code knows (%2570, %252e) are refused', async () => {
    for (const p of ['/v2/%2570ayments/x', '/v2/x/%252e%252e/payments/x']) {
      const r = await raw([`GET ${p} HTTP/1.1`, 'Host: a', 'Connection: close']);
      expect([p, statusOf(r.text)]).toEqual([p, 400]);
    }
  });

  // Decoded once `%25%37%30` is `%70`, decoded twice `p`: the same double encoding of `p`
  // as `%2570`, which the lenient reading already takes for an origin that decodes twice.
  it('a double-encoded letter spelled %25%37%30 is refused like %2570 (it passes as the public route)', async () => {
    const r = await raw(['GET /v2/%25%37%30ayments/x HTTP/1.1', 'Host: a', 'Connection: close']);
    expect(statusOf(r.text)).toBe(400);
  });

  // Decoded once `%25%32%65` is `%2e`, decoded twice `.`: the same double encoding as `%252e` (docs/security.md: 400).
  it('a double-encoded dot segment spelled %25%32%65%25%32%65 is refused like %252e%252e', async () => {
    const r = await raw(['GET /v2/x/%25%32%65%25%32%65/payments/x HTTP/1.1', 'Host: a', 'Connection: close']);
    expect(statusOf(r.text)).toBe(400);
  });

  it("an untrusted client's X-Real-IP does not reach the origin as sent", async () => {
    // 127.0.0.1 is not in trusted_proxies: its X-Forwarded-For is replaced, but X-Real-IP
    // (nginx realip's default field; Kong overwrites it with the client's address) passes as sent.
    const r = await raw(['GET /open HTTP/1.1', 'Host: a', 'X-Real-IP: 6.6.6.6', 'Connection: close']);
    expect(statusOf(r.text)).toBe(200);
    const { h } = heard(r.text);
    expect(h['x-forwarded-for']).toBe('127.0.0.1');
    expect(h['x-real-ip']).not.toBe('6.6.6.6');
  });
});
