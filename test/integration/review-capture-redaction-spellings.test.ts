import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../../src/store/store.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Named fields (the default redact_fields) must never be stored, in any spelling the
 * receiving application decodes: docs/capture.md ("Names are matched as a parser reads
 * them", "JSON inside a JSON string, a form value or a query value is read as JSON", "a
 * body of one line with an `=` that names a field, whatever its type") and DESIGN's
 * "Wake detail and replay". Each test sends one request through an `auth: none` route
 * and looks for the secret in the wake the API shows and in every stored table.
 */
// Regression tests from a review of redaction (each failed before its fix).
describe('review: redaction of named fields in combined spellings', () => {
  let origin: TestServer;
  let t: TestGateway;
  let answer: { type: string; body: string } = { type: 'application/json', body: '{"ok":true}' };

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': answer.type });
        res.end(answer.body);
      });
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
  const send = async (path: string, init: RequestInit = {}): Promise<any> => {
    const r = await fetch(`${t.url}${path}`, init);
    await r.arrayBuffer();
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const w = await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json();
    expect(w.request, 'the wake kept its detail').not.toBeNull();
    return w;
  };
  /** Every stored row of the detail table, as text: a secret must be in none. */
  const stored = async () => JSON.stringify(await queryRows(t.gw.store, `SELECT * FROM ${t.gw.store.db}.wake_details`));

  it('a JSON string holding a JSON document whose key is written with an escape (pass\\u0077ord): the password is not stored', async () => {
    // What the application reads: the inner document's key is "password".
    const inner = '{"pass\\u0077ord":"hunter2-nested-esc"}';
    expect(JSON.parse(inner).password).toBe('hunter2-nested-esc');
    const body = JSON.stringify({ data: inner });
    expect(JSON.parse(JSON.parse(body).data).password).toBe('hunter2-nested-esc');
    const w = await send('/pub/a', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(w.request.body).not.toContain('hunter2-nested-esc');
    expect(await stored()).not.toContain('hunter2-nested-esc');
  });

  it('a query value holding JSON whose key is written with an escape: the password is not stored', async () => {
    const q = encodeURIComponent('{"pass\\u0077ord":"hunter2-query-esc"}');
    expect(JSON.parse(new URLSearchParams(`data=${q}`).get('data') as string).password).toBe('hunter2-query-esc');
    const w = await send(`/pub/b?data=${q}`);
    expect(decodeURIComponent(w.request.query)).not.toContain('hunter2-query-esc');
    expect(await stored()).not.toContain('hunter2-query-esc');
  });

  it('a response body whose JSON string holds a document with an escaped key: the token is not stored', async () => {
    answer = { type: 'application/json', body: JSON.stringify({ data: '{"t\\u006fken":"tok-resp-nested-esc"}' }) };
    try {
      const w = await send('/pub/c');
      expect(w.response.body).not.toContain('tok-resp-nested-esc');
      expect(await stored()).not.toContain('tok-resp-nested-esc');
    } finally {
      answer = { type: 'application/json', body: '{"ok":true}' };
    }
  });

  it('a URL in a JSON string whose query names the field with percent-encoding (pass%77ord): the password is not stored', async () => {
    const next = 'https://example.test/cb?user=ann&pass%77ord=hunter2-url-enc';
    expect(new URL(next).searchParams.get('password')).toBe('hunter2-url-enc');
    const body = JSON.stringify({ next });
    const w = await send('/pub/d', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(w.request.body).not.toContain('hunter2-url-enc');
    expect(await stored()).not.toContain('hunter2-url-enc');
  });

  it('a form of one line sent as application/json whose field name is percent-encoded: the password is not stored', async () => {
    // capture.md: "a body of one line with an `=` that names a field, whatever its type
    // (`user=a&password=…` sent as application/json or octet-stream)" and "a form or query
    // field written with percent-encoding … is redacted too".
    const body = 'user=ann&pass%77ord=hunter2-form-json';
    expect(new URLSearchParams(body).get('password')).toBe('hunter2-form-json');
    const w = await send('/pub/e', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(w.request.body).not.toContain('hunter2-form-json');
    expect(await stored()).not.toContain('hunter2-form-json');
  });

  it('a form of one line sent as application/octet-stream naming card+number (a space, read as card_number): the number is not stored', async () => {
    const body = 'user=ann&card+number=4242424242424242';
    const w = await send('/pub/f', {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body,
    });
    expect(w.request.body).not.toContain('4242424242424242');
    expect(await stored()).not.toContain('4242424242424242');
  });
});
