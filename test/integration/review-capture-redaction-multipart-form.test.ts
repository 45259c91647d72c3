import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../../src/store/store.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Form fields (urlencoded and multipart) named in redact_fields are replaced "as a parser
 * reads them" (docs/capture.md). Where parsers differ on a field's name, one of them
 * reading it as a named field is enough for the value to be a secret: these bodies are
 * read as `password` by common servers the gateway may front.
 */
// Regression tests from a review of redaction (each failed before its fix).
describe('review: form and multipart names as servers read them', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      routes: [{ name: 'pub', prefix: '/pub', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  // biome-ignore lint/suspicious/noExplicitAny: wakes are read loosely
  const send = async (body: string | Buffer, contentType: string): Promise<any> => {
    const r = await fetch(`${t.url}/pub/form`, { method: 'POST', headers: { 'content-type': contentType }, body });
    await r.arrayBuffer();
    await flushed(t.gw);
    const w = await (
      await fetch(`${t.url}/v2/wakes/${r.headers.get('x-wake-id')}`, { headers: bearer(t.admin) })
    ).json();
    expect(w.request, 'the wake kept its detail').not.toBeNull();
    return w;
  };
  const stored = async () => JSON.stringify(await queryRows(t.gw.store, `SELECT * FROM ${t.gw.store.db}.wake_details`));

  it('a multipart part with name*= before name= (PHP reads name= only; Werkzeug takes the last): the password is not stored', async () => {
    const body =
      '--bnd\r\nContent-Disposition: form-data; name*=utf-8\'\'note; name="password"\r\n\r\nhunter2-mp-ext\r\n--bnd--\r\n';
    const w = await send(body, 'multipart/form-data; boundary=bnd');
    expect(w.request.body).not.toContain('hunter2-mp-ext');
    expect(await stored()).not.toContain('hunter2-mp-ext');
  });

  it("a multipart part named with single quotes (name='password', which PHP's parser unquotes): the password is not stored", async () => {
    const body = "--bnd\r\nContent-Disposition: form-data; name='password'\r\n\r\nhunter2-mp-squote\r\n--bnd--\r\n";
    const w = await send(body, 'multipart/form-data; boundary=bnd');
    expect(w.request.body).not.toContain('hunter2-mp-squote');
    expect(await stored()).not.toContain('hunter2-mp-squote');
  });

  it('a urlencoded form starting with a UTF-8 BOM (Express body-parser strips it, then reads password): the password is not stored', async () => {
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('password=hunter2-bom-form&user=ann')]);
    const w = await send(body, 'application/x-www-form-urlencoded');
    expect(w.request.body).not.toContain('hunter2-bom-form');
    expect(await stored()).not.toContain('hunter2-bom-form');
  });
});
