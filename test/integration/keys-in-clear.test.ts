import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/** Issue #25, item 7: a gateway key is stored and forwarded nowhere, in no spelling. */
describe('gateway keys sent where they do not belong', () => {
  let origin: TestServer;
  let t: TestGateway;
  const seen: { url: string; raw: string }[] = [];
  const secret = `svc_live_${'K9'.repeat(20)}`;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ url: req.url ?? '', raw: `${req.rawHeaders.join('\n')}\n${Buffer.concat(chunks)}` });
        res.end('ok');
      });
    });
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      capture: { detail: { max_per_second: 0 } },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const wakeOf = async (id: string) =>
    (await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json()) as Record<string, unknown>;

  it.each([
    ['in the path', `/open/${secret}/x`],
    ['in the query', `/open/x?api_key=${secret}`],
    ['percent-encoded in the query', `/open/x?k=${secret.replaceAll('_', '%5F')}`],
    ['in a /v2 path', `/v2/api-keys/${secret}`],
  ])('a key %s is refused with 400, never forwarded, and its wake keeps the URL without it', async (_n, url) => {
    const before = seen.length;
    const r = await rawExchange(
      Number(new URL(t.url).port),
      `GET ${url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    expect(statusOf(r.text)).toBe(400);
    expect(r.text).toContain('gateway key was sent in the URL');
    expect(seen.length).toBe(before);
    const id = /x-wake-id: (wk_\w+)/.exec(r.text)?.[1] as string;
    await flushed(t.gw);
    const w = await wakeOf(id);
    expect(JSON.stringify(w)).not.toContain(secret.slice(9));
  });

  it('a key in User-Agent or X-Consumer-Id is neither forwarded nor stored; one in a body is refused (400)', async () => {
    const before = seen.length;
    const r = await fetch(`${t.url}/open/headers`, {
      headers: { 'user-agent': `curl/8 ${secret}`, 'x-consumer-id': secret },
    });
    expect(r.status).toBe(200);
    const id = r.headers.get('x-wake-id') as string;
    await r.text();
    expect(seen.length).toBe(before + 1);
    expect(seen.at(-1)?.raw).not.toContain(secret);
    // In a body (here percent-encoded in a form): never forwarded, kept redacted.
    const f = await fetch(`${t.url}/open/form`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `note=${secret.replaceAll('_', '%5F')}&a=1`,
    });
    expect(f.status).toBe(400);
    const fe = (await f.json()) as { error: { param: string; message: string } };
    expect(fe.error.param).toBe('body');
    expect(fe.error.message).toContain('gateway key was sent in the request body');
    expect(seen.length).toBe(before + 1);
    await flushed(t.gw);
    const w = await wakeOf(id);
    const text = JSON.stringify(w) + JSON.stringify(await wakeOf(f.headers.get('x-wake-id') as string));
    expect(text).not.toContain(secret.slice(9));
    expect(w.user_agent).toContain('[redacted:gateway-key]');
    expect(w.consumer).toBe('[redacted:gateway-key]');
    const list = JSON.stringify(
      await (await fetch(`${t.url}/v2/wakes?limit=100`, { headers: bearer(t.admin) })).json(),
    );
    expect(list).not.toContain(secret.slice(9));
  });
});
