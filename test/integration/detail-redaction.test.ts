import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Through the real listener and storage: what a wake's stored detail keeps of a
 * request body (GET /v2/wakes/{id}), and what a replay re-sends (DESIGN "Wake detail").
 */
describe('stored detail: named fields whatever their value, and every other byte as sent', () => {
  let origin: TestServer;
  let t: TestGateway;
  const seen: string[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    t = await startGateway({
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        {
          name: 'cut',
          prefix: '/cut',
          auth: 'none',
          origins: { production: origin.url },
          capture: { detail: { max_body_bytes: 64 } },
        },
      ],
    });
  }, 60_000);
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  const post = async (path: string, body: string, ct: string) => {
    const r = await fetch(`${t.url}${path}`, { method: 'POST', headers: { 'content-type': ct }, body });
    await r.arrayBuffer();
    return r.headers.get('x-wake-id') as string;
  };
  const bodyOf = async (id: string) => {
    await flushed(t.gw);
    const w = await call(t.url, t.admin, 'GET', `/v2/wakes/${id}`);
    expect(w.status).toBe(200);
    const req = w.body.request as { body: string; body_truncated: boolean };
    return { body: req.body, truncated: req.body_truncated };
  };

  it('a gateway key used as a header field name is kept out of storage', async () => {
    const key = `svc_live_${'Ab3'.repeat(15)}`;
    const r = await fetch(`${t.url}/open/h`, { headers: { [key]: '1', 'x-plain': 'kept' } });
    await r.arrayBuffer();
    await flushed(t.gw);
    const w = await call(t.url, t.admin, 'GET', `/v2/wakes/${r.headers.get('x-wake-id')}`);
    const text = JSON.stringify(w.body);
    expect(text).not.toContain('Ab3Ab3Ab3Ab3');
    expect(w.body.request.headers).toContainEqual(['x-plain', 'kept']);
  });

  it('a named JSON field holding an array or object is stored as one marker', async () => {
    const id = await post(
      '/open/x',
      '{"user":"a","password":["hunter2"],"secret":{"value":"s3cr3tvalue"},"token":"t","token":{}}',
      'application/json',
    );
    const b = await bodyOf(id);
    expect(b.body).not.toMatch(/hunter2|s3cr3tvalue/);
    expect(b.body).toMatch(
      /^\{"user":"a","password":"\[redacted:[0-9a-f]{12}\]","secret":"\[redacted:[0-9a-f]{12}\]","token":"\[redacted:[0-9a-f]{12}\]","token":"\[redacted:[0-9a-f]{12}\]"\}$/,
    );
  });

  it('escaped JSON in a string is redacted in a body cut at max_body_bytes, and in NDJSON', async () => {
    const cut = await bodyOf(
      await post('/cut/x', `{"data":"{\\"password\\":\\"hunter2\\"}","pad":"${'x'.repeat(200)}"}`, 'application/json'),
    );
    expect(cut.truncated).toBe(true);
    expect(cut.body).not.toContain('hunter2');
    const nd = await bodyOf(
      await post('/open/x', '{"a":1}\n{"data":"{\\"password\\":\\"hunter2\\"}"}\n', 'application/x-ndjson'),
    );
    expect(nd.body).not.toContain('hunter2');
    expect(nd.body.startsWith('{"a":1}\n{"data":')).toBe(true);
  });

  it('a form sent as application/json is redacted as a form', async () => {
    const b = await bodyOf(await post('/open/x', 'user=a&password=hunter2', 'application/json'));
    expect(b.body).toMatch(/^user=a&password=%5Bredacted%3A[0-9a-f]{12}%5D$/);
  });

  it('a replay re-sends the captured JSON body as it was sent (big integers, spacing), the marker filled', async () => {
    const sent = '{ "order_id" : 12345678901234567890,\n  "password": "hunter2", "n":1, "n":2 }';
    const id = await post('/open/x', sent, 'application/json');
    const b = await bodyOf(id);
    expect(b.body).toMatch(
      /^\{ "order_id" : 12345678901234567890,\n {2}"password": "\[redacted:[0-9a-f]{12}\]", "n":1, "n":2 \}$/,
    );
    const before = seen.length;
    const r = await call(t.url, t.admin, 'POST', `/v2/wakes/${id}/replay`, {
      allow_unsafe: true,
      set: { '$.password': 'hunter2' },
    });
    expect(r.status).toBe(202);
    const end = Date.now() + 10_000;
    while (seen.length === before && Date.now() < end) await new Promise((res) => setTimeout(res, 50));
    expect(seen.at(-1)).toBe(sent);
  });
});
