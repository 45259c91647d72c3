// Regression tests from a review of HTTP semantics (2026-11-27).
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { rawExchange, statusOf } from '../helpers/raw.js';
import { route, type Scripted, scripted } from '../helpers/scripted-origin.js';

/**
 * RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any
 * HTTP/1.1 request message that lacks a Host header field and to any request message
 * that contains more than one Host header field line or a Host header field with an
 * invalid field value." The gateway enforced the "more than one line" part (and
 * userinfo), but forwarded an HTTP/1.1 request with no Host at all, and one whose Host is
 * no uri-host[:port] (RFC 9110 §7.2), which then reached the origin as X-Forwarded-Host,
 * the field origins build absolute URLs from (redirects, password-reset links).
 */
describe('HTTP/1.1 Host validity (RFC 9112 §3.2)', () => {
  let t: TestGateway;
  let o: Scripted;
  let port: number;

  beforeAll(async () => {
    o = await scripted((_h, _c, _n, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'));
    t = await startGateway({ server: { http2: 'h2c' }, routes: [route('o', o.url)] });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await o?.close();
  });

  const bodyOf = (text: string) =>
    JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as {
      error: { type: string; param: string | null; message: string; wake_id: string | null };
    };

  it('an HTTP/1.1 request without Host is answered 400 and never forwarded', async () => {
    const before = o.heads.length;
    const r = await rawExchange(port, 'GET /o/x HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(statusOf(r.text)).toBe(400);
    expect(o.heads.length).toBe(before);
  });

  it('a Host that is no uri-host[:port] is answered 400, not passed on as X-Forwarded-Host', async () => {
    for (const host of ['good.example/evil', 'a b', 'good.example:80:80']) {
      const before = o.heads.length;
      const r = await rawExchange(port, `GET /o/x HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      expect({ host, status: statusOf(r.text) }).toEqual({ host, status: 400 });
      expect(o.heads.length).toBe(before);
    }
  });

  it("the refusal is the gateway's JSON answer (param host), recorded as a wake, drawn from the unauthenticated bucket", async () => {
    const heads = [
      'GET /o/no-host HTTP/1.1\r\nConnection: close\r\n\r\n',
      'GET /o/bad-host HTTP/1.1\r\nHost: good.example:80:80\r\nConnection: close\r\n\r\n',
      'GET /o/empty-host HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n',
    ];
    const ids: string[] = [];
    for (const head of heads) {
      const r = await rawExchange(port, head);
      expect(statusOf(r.text), head).toBe(400);
      const e = bodyOf(r.text).error;
      expect(e, head).toMatchObject({ type: 'invalid_request', param: 'host' });
      expect(r.text, head).toMatch(new RegExp(`\r\nx-wake-id: ${e.wake_id}\r\n`, 'i'));
      expect(r.text.toLowerCase(), head).toMatch(/ratelimit-policy: "unauthenticated"/);
      ids.push(e.wake_id as string);
    }
    await flushed(t.gw);
    const rows = (
      await t.gw.wakes.list({ environment: 'production', pathPattern: '^/o/(no|bad|empty)-host$' }, 10, null)
    ).rows;
    expect(rows.map((w) => w.id).sort()).toEqual([...ids].sort());
    for (const w of rows) expect(w).toMatchObject({ status: 400, route: 'none' });
  });

  it('valid hosts are served (a name, an IPv4 or IPv6 address, with a port or not); HTTP/1.0 may send none', async () => {
    for (const host of ['good.example', 'good.example:8443', '127.0.0.1:80', '[::1]:8080', 'xn--bcher-kva.example']) {
      const r = await rawExchange(port, `GET /o/ok HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      expect({ host, status: statusOf(r.text) }).toEqual({ host, status: 200 });
      expect(o.heads.at(-1)?.toLowerCase()).toContain(`x-forwarded-host: ${host}`);
    }
    const old = await rawExchange(port, 'GET /o/ok HTTP/1.0\r\n\r\n');
    expect(statusOf(old.text)).toBe(200);
    // HTTP/1.0 with an invalid Host is refused all the same.
    const bad = await rawExchange(port, 'GET /o/ok HTTP/1.0\r\nHost: a/b\r\n\r\n');
    expect(statusOf(bad.text)).toBe(400);
  });

  it('a /v2 call without Host, or with an invalid one, is refused the same way, on the main and the management listener', async () => {
    const mport = Number(new URL(t.managementUrl).port);
    for (const p of [port, mport]) {
      for (const head of [
        `GET /v2/wakes HTTP/1.1\r\nAuthorization: Bearer ${t.admin}\r\nConnection: close\r\n\r\n`,
        `GET /v2/wakes HTTP/1.1\r\nHost: a b\r\nAuthorization: Bearer ${t.admin}\r\nConnection: close\r\n\r\n`,
      ]) {
        const r = await rawExchange(p, head);
        expect(statusOf(r.text), `${p} ${head}`).toBe(400);
        expect(bodyOf(r.text).error, head).toMatchObject({ type: 'invalid_request', param: 'host' });
      }
      const good = await rawExchange(
        p,
        `GET /v2/wakes?limit=1 HTTP/1.1\r\nHost: gw.example\r\nAuthorization: Bearer ${t.admin}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(good.text)).toBe(200);
    }
  });

  it('HTTP/2: an :authority that is no uri-host[:port] is refused 400 naming :authority, never forwarded', async () => {
    const s = http2.connect(t.url);
    s.on('error', () => {});
    const get = (authority: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const r = s.request({ ':method': 'GET', ':path': '/o/h2', ':authority': authority });
        let status = 0;
        let body = '';
        r.on('response', (h) => {
          status = Number(h[':status']);
        });
        r.setEncoding('utf8');
        r.on('data', (c: string) => {
          body += c;
        });
        r.on('end', () => resolve({ status, body }));
        r.on('error', reject);
        r.end();
      });
    try {
      for (const authority of ['good.example:80:80', 'a:b', 'x%zz', '[::1']) {
        const before = o.heads.length;
        const r = await get(authority);
        expect({ authority, status: r.status }).toEqual({ authority, status: 400 });
        expect(JSON.parse(r.body).error).toMatchObject({ type: 'invalid_request', param: ':authority' });
        expect(o.heads.length).toBe(before);
      }
      expect((await get('good.example:8443')).status).toBe(200);
      expect(o.heads.at(-1)?.toLowerCase()).toContain('x-forwarded-host: good.example:8443');
    } finally {
      s.close();
    }
  });
});
