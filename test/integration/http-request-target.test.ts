// Regression tests from a review of HTTP semantics (2026-11-28).
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { rawExchange, statusOf } from '../helpers/raw.js';
import { route, type Scripted, scripted } from '../helpers/scripted-origin.js';

/**
 * Two parts of RFC 9112 the gateway got wrong:
 * - §3.2.2: "A server MUST accept the absolute-form in requests", and then uses its
 *   authority, ignoring Host. `GET http://api.example/o/x HTTP/1.1` was refused 400.
 * - §6.1: a transfer coding the server does not understand is answered 501. A body sent
 *   `Transfer-Encoding: gzip, chunked` reached the origin with the chunks taken off and
 *   the gzip left on, as a plain body of compressed bytes (and the key scan read
 *   compressed bytes the origin never decodes).
 */
describe('request targets in absolute-form, and transfer codings (RFC 9112 §3.2.2, §6.1)', () => {
  let t: TestGateway;
  let o: Scripted;
  let port: number;
  const bodies: string[] = [];

  beforeAll(async () => {
    o = await scripted((_h, _c, _n, s, body) => {
      bodies.push(body);
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    });
    t = await startGateway({ routes: [route('o', o.url)] });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await o?.close();
  });

  const errorOf = (text: string) =>
    (
      JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as {
        error: { type: string; param: string; message: string };
      }
    ).error;

  it('an absolute-form target is served as its path, its authority taken as Host (the sent Host ignored)', async () => {
    const cases: [string, string, string][] = [
      ['http://api.example/o/abs?q=1', 'api.example', 'GET /o/abs?q=1 '],
      ['HTTPS://api.example:8443/o/abs', 'api.example:8443', 'GET /o/abs '],
      ['http://[::1]:8080/o/abs', '[::1]:8080', 'GET /o/abs '],
    ];
    for (const [target, authority, line] of cases) {
      const before = o.heads.length;
      const r = await rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n`);
      expect({ target, status: statusOf(r.text) }).toEqual({ target, status: 200 });
      expect(o.heads.length).toBe(before + 1);
      const head = (o.heads.at(-1) as string).toLowerCase();
      expect(head.startsWith(line.toLowerCase()), head).toBe(true);
      expect(head).toContain(`x-forwarded-host: ${authority}`);
      expect(head).not.toContain('other.example');
    }
  });

  it('an absolute-form target with no path is the root; HTTP/1.0 without Host is served by it too', async () => {
    const r = await rawExchange(port, 'GET http://api.example HTTP/1.0\r\n\r\n');
    // No route at /: refused by the route table, not by the form of the target.
    expect(statusOf(r.text)).toBe(404);
    const q = await rawExchange(port, 'GET http://api.example/o?x=1 HTTP/1.0\r\n\r\n');
    expect(statusOf(q.text)).toBe(200);
    expect((o.heads.at(-1) as string).toLowerCase()).toContain('x-forwarded-host: api.example');
  });

  it('the wake records the path, not the absolute URL', async () => {
    const r = await rawExchange(port, 'GET http://api.example/o/recorded-abs HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(statusOf(r.text)).toBe(200);
    const id = /\r\nx-wake-id: (\S+)\r\n/i.exec(r.text)?.[1] as string;
    await flushed(t.gw);
    const rows = (await t.gw.wakes.list({ environment: 'production', pathPattern: 'recorded-abs' }, 10, null)).rows;
    expect(rows.map((w) => [w.id, w.path])).toEqual([[id, '/o/recorded-abs']]);
  });

  it('absolute-form targets that are not http(s) with a valid host are refused 400 and never forwarded', async () => {
    for (const target of [
      'http://user:pw@api.example/o/x',
      'http:///o/x',
      'ftp://api.example/o/x',
      'http://a b/o/x',
      'http://api.example:80:80/o/x',
      'api.example/o/x',
    ]) {
      const before = o.heads.length;
      const r = await rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: api.example\r\nConnection: close\r\n\r\n`);
      expect({ target, status: statusOf(r.text) }).toEqual({ target, status: 400 });
      expect(errorOf(r.text).type).toBe('invalid_request');
      expect(o.heads.length, target).toBe(before);
    }
  });

  it('a gateway key in an absolute-form target is refused as one in any URL', async () => {
    const before = o.heads.length;
    const r = await rawExchange(
      port,
      `GET http://api.example/o/x?k=${t.admin} HTTP/1.1\r\nHost: api.example\r\nConnection: close\r\n\r\n`,
    );
    expect(statusOf(r.text)).toBe(400);
    expect(errorOf(r.text).param).toBe('url');
    expect(o.heads.length).toBe(before);
  });

  it('a /v2 call in absolute-form is answered by the API, on the main and the management listener', async () => {
    const mport = Number(new URL(t.managementUrl).port);
    for (const p of [port, mport]) {
      const r = await rawExchange(
        p,
        `GET http://gw.example/v2/wakes?limit=1 HTTP/1.1\r\nAuthorization: Bearer ${t.admin}\r\nConnection: close\r\n\r\n`,
      );
      expect({ p, status: statusOf(r.text) }).toEqual({ p, status: 200 });
      expect(r.text).toContain('"data"');
    }
  });

  it('a body in a transfer coding other than chunked is refused 501 naming transfer-encoding, never forwarded', async () => {
    const gz = gzipSync(Buffer.from('{"secret":"plain"}'));
    for (const te of ['gzip, chunked', 'deflate, chunked', 'x-custom, chunked']) {
      const before = o.heads.length;
      const head = `POST /o/te HTTP/1.1\r\nHost: api.example\r\nTransfer-Encoding: ${te}\r\nConnection: close\r\n\r\n`;
      const chunk = `${gz.length.toString(16)}\r\n${gz.toString('latin1')}\r\n0\r\n\r\n`;
      const r = await rawExchange(port, Buffer.concat([Buffer.from(head), Buffer.from(chunk, 'latin1')]));
      expect({ te, status: statusOf(r.text) }).toEqual({ te, status: 501 });
      expect(errorOf(r.text)).toMatchObject({ type: 'invalid_request', param: 'transfer-encoding' });
      expect(r.text).toMatch(/\r\nx-wake-id: wk_/i);
      expect(o.heads.length, te).toBe(before);
    }
    // The connection stays usable: the refused body was read off it.
    const head =
      'POST /o/te HTTP/1.1\r\nHost: api.example\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n';
    const r = await rawExchange(port, `${head}GET /o/after HTTP/1.1\r\nHost: api.example\r\nConnection: close\r\n\r\n`);
    expect(r.text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 501', 'HTTP/1.1 200']);
  });

  it('chunked alone, in any case, is forwarded as before', async () => {
    for (const te of ['chunked', 'Chunked', 'CHUNKED']) {
      const r = await rawExchange(
        port,
        `POST /o/te-ok HTTP/1.1\r\nHost: api.example\r\nTransfer-Encoding: ${te}\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
      );
      expect({ te, status: statusOf(r.text) }).toEqual({ te, status: 200 });
      expect(bodies.at(-1)).toContain('hello');
    }
  });
});
