import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * DESIGN: "`set` fills redacted values only: each name must be one that holds a marker
 * in the captured request (400 `param: set.<name>` otherwise ...), and a value is a JSON
 * scalar." No name is dropped silently, and header names match in any case.
 */
describe('replay set names', () => {
  let origin: TestServer;
  let t: TestGateway;
  let id: string;
  const seen: { url: string; apiKey: string | undefined }[] = [];
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      seen.push({ url: req.url ?? '', apiKey: req.headers['x-api-key'] as string | undefined });
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    t = await startGateway({
      routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
    });
    // token (query) and x-api-key (header) are redacted by default.
    const r = await fetch(`${t.url}/api/x?token=abc&a=1`, { headers: { 'x-api-key': 'k1' } });
    await r.arrayBuffer();
    id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const replay = async (raw: string) => {
    const r = await fetch(`${t.url}/v2/wakes/${id}/replay`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: raw,
    });
    return { status: r.status, body: await r.json() };
  };

  it('set {"__proto__": {...}} (a name holding no marker, a value not a scalar) is 400 set.__proto__, not silently dropped', async () => {
    const r = await replay('{"set": {"token": "v", "__proto__": {"token": "w"}}}');
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'set.__proto__' });
  });

  it('set {"__proto__": "x"} (a scalar for a name that holds no marker) is 400 set.__proto__', async () => {
    const r = await replay('{"set": {"token": "v", "__proto__": "x"}}');
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'set.__proto__' });
  });

  it('set names a redacted header case-insensitively (X-Api-Key for the captured x-api-key)', async () => {
    const before = seen.length;
    const r = await replay('{"set": {"token": "v", "X-Api-Key": "k2"}}');
    expect(r.status).toBe(202);
    for (let i = 0; i < 100 && seen.length === before; i++) await new Promise((res) => setTimeout(res, 20));
    expect(seen[before]).toMatchObject({ url: '/api/x?token=v&a=1', apiKey: 'k2' });
  });

  it('two names for one header (x-api-key and X-API-KEY) are 400 naming the second', async () => {
    const r = await replay('{"set": {"token": "v", "x-api-key": "a", "X-API-KEY": "b"}}');
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'set.X-API-KEY' });
  });
});
