// Regression tests from a review of capture and redaction (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../../src/store/store.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Named fields must be redacted "as a parser reads them" before anything is stored
 * (docs/capture.md, DESIGN "Wake detail and replay"). Each test sends one request
 * through an `auth: none` route and looks for the secret in the wake the API shows
 * (base64 bodies decoded) and in every stored row.
 */
describe('named values stored in clear', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      routes: [
        { name: 'pub', prefix: '/pub', auth: 'none', origins: { production: origin.url } },
        {
          name: 'keep',
          prefix: '/keep',
          auth: 'none',
          origins: { production: origin.url },
          capture: { detail: { opaque_bodies: 'keep' } },
        },
      ],
    });
  }, 20_000);
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  // biome-ignore lint/suspicious/noExplicitAny: wakes are read loosely
  const send = async (path: string, body: string | Buffer, type: string): Promise<any> => {
    const r = await fetch(`${t.url}${path}`, { method: 'POST', headers: { 'content-type': type }, body });
    await r.arrayBuffer();
    await flushed(t.gw);
    const w = await (
      await fetch(`${t.url}/v2/wakes/${r.headers.get('x-wake-id')}`, { headers: bearer(t.admin) })
    ).json();
    expect(w.request, 'the wake kept its detail').not.toBeNull();
    return w;
  };
  // biome-ignore lint/suspicious/noExplicitAny: wakes are read loosely
  const shown = (w: any): string =>
    w.request.body_encoding === 'base64'
      ? Buffer.from(w.request.body, 'base64').toString('latin1')
      : String(w.request.body);
  const stored = async () => JSON.stringify(await queryRows(t.gw.store, `SELECT * FROM ${t.gw.store.db}.wake_details`));

  it('a multipart part whose Content-Disposition is folded (name on a continuation line, as dicer/busboy 0.x/@fastify/busboy unfold it): the password is not stored', async () => {
    const body = '--bnd\r\nContent-Disposition: form-data;\r\n name="password"\r\n\r\nhunter2-folded\r\n--bnd--\r\n';
    const w = await send('/pub/mp', body, 'multipart/form-data; boundary=bnd');
    expect(shown(w)).not.toContain('hunter2-folded');
    expect(await stored()).not.toContain('hunter2-folded');
  });

  it('a multipart/mixed part nested in a form-data part (RFC 2388 nesting, read by cgi.FieldStorage): the password is not stored', async () => {
    const body =
      '--outer\r\nContent-Disposition: form-data; name="files"\r\nContent-Type: multipart/mixed; boundary=inner\r\n\r\n' +
      '--inner\r\nContent-Disposition: form-data; name="password"\r\n\r\nhunter2-nested-mp\r\n--inner--\r\n' +
      '\r\n--outer--\r\n';
    const w = await send('/pub/mp2', body, 'multipart/form-data; boundary=outer');
    expect(shown(w)).not.toContain('hunter2-nested-mp');
    expect(await stored()).not.toContain('hunter2-nested-mp');
  });

  it('opaque_bodies: keep: a urlencoded form holding one byte that is not UTF-8 (a Latin-1 name) keeps its password field redacted', async () => {
    // body-parser, PHP and Rails all read password=… from this body.
    const body = Buffer.concat([
      Buffer.from('name=Jos'),
      Buffer.from([0xe9]),
      Buffer.from('&password=hunter2-latin1-form'),
    ]);
    const w = await send('/keep/f', body, 'application/x-www-form-urlencoded');
    expect(shown(w)).not.toContain('hunter2-latin1-form');
    expect(await stored()).not.toContain('hunter2-latin1-form');
  });

  it('opaque_bodies: keep: a JSON body holding one byte that is not UTF-8 keeps its password field redacted', async () => {
    const body = Buffer.concat([
      Buffer.from('{"name":"Jos'),
      Buffer.from([0xe9]),
      Buffer.from('","password":"hunter2-latin1-json"}'),
    ]);
    // JSON.parse(body.toString()) reads password (the byte becomes U+FFFD).
    expect(JSON.parse(body.toString()).password).toBe('hunter2-latin1-json');
    const w = await send('/keep/j', body, 'application/json');
    expect(shown(w)).not.toContain('hunter2-latin1-json');
    expect(await stored()).not.toContain('hunter2-latin1-json');
  });
});
