import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

/**
 * Replay. DESIGN ("Wake detail and replay") and docs/api.md: "A redaction marker is never
 * sent to an origin as if it were the value": a wake whose query or body holds redacted
 * values is refused (409) unless `set` supplies them, and "a marker no name can reach
 * (inside a string, …) is 409: that wake cannot be replayed". And the diff: "other
 * bodies by size and SHA-256"; `identical: true` tells an operator the origin answered
 * the same.
 */
// Regression tests from a review of capture and replay (each failed before its fix).
describe('review: replay sends no marker, and its diff tells changed from equal', () => {
  let origin: TestServer;
  let t: TestGateway;
  let version = 1;
  const seen: { url: string; body: string }[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ url: req.url ?? '', body: Buffer.concat(chunks).toString('utf8') });
        if (req.url?.startsWith('/pub/report')) {
          // 40,000 bytes, over max_body_bytes (32,768); the versions differ only past it.
          const head = 'a'.repeat(35_000);
          const tail = (version === 1 ? 'x' : 'y').repeat(5_000);
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end(head + tail);
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
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

  const api = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    // biome-ignore lint/suspicious/noExplicitAny: API answers are read loosely
    return { status: r.status, body: (await r.json()) as any };
  };
  // biome-ignore lint/suspicious/noExplicitAny: wakes are read loosely
  const wake = async (id: string): Promise<any> => {
    await flushed(t.gw);
    return (await api('GET', `/v2/wakes/${id}`)).body;
  };
  const settle = () => new Promise((r) => setTimeout(r, 500));

  it('a token redacted in a URL nested in a URL (a return_to in a JSON body) is not re-sent as its marker', async () => {
    const body = JSON.stringify({
      next: `https://app.test/login?return_to=${encodeURIComponent('https://api.test/cb?token=tok-nested-url-1')}`,
    });
    const r = await fetch(`${t.url}/pub/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    await r.arrayBuffer();
    const id = r.headers.get('x-wake-id') as string;
    const w = await wake(id);
    // The capture redacted it (the marker stands two percent-encodings deep).
    expect(w.request.body).not.toContain('tok-nested-url-1');
    expect(w.request.body).toContain('redacted');
    seen.length = 0;
    const rp = await api('POST', `/v2/wakes/${id}/replay`, { allow_unsafe: true });
    await settle();
    // Whatever the answer, the origin never gets the marker as the token's value.
    expect(seen.map((s) => s.body).join('\n')).not.toContain('redacted');
    expect(rp.status).toBe(409);
    expect(rp.body.error.type).toBe('conflict');
  });

  it('a token redacted in a URL nested in a URL in the query is not re-sent as its marker', async () => {
    const inner = `https://api.test/cb?token=tok-nested-q-1`;
    const next = `https://app.test/login?return_to=${encodeURIComponent(inner)}`;
    const r = await fetch(`${t.url}/pub/go?next=${encodeURIComponent(next)}`);
    await r.arrayBuffer();
    const id = r.headers.get('x-wake-id') as string;
    const w = await wake(id);
    expect(w.request.query).not.toContain('tok-nested-q-1');
    expect(w.request.query).toContain('redacted');
    seen.length = 0;
    const rp = await api('POST', `/v2/wakes/${id}/replay`, {});
    await settle();
    expect(seen.map((s) => s.url).join('\n')).not.toContain('redacted');
    expect(rp.status).toBe(409);
  });

  it('an answer that changed past max_body_bytes is not reported identical', async () => {
    version = 1;
    const r = await fetch(`${t.url}/pub/report`);
    expect((await r.text()).length).toBe(40_000);
    const id = r.headers.get('x-wake-id') as string;
    const w = await wake(id);
    expect(w.response).toMatchObject({ body_bytes: 40_000, body_truncated: true });
    version = 2;
    const rp = await api('POST', `/v2/wakes/${id}/replay`, {});
    expect(rp.status).toBe(202);
    // biome-ignore lint/suspicious/noExplicitAny: wakes are read loosely
    let rw: any = null;
    await until(
      async () => {
        rw = await wake(rp.body.replay_wake_id);
        return rw?.diff != null;
      },
      10_000,
      'the replay diff',
    );
    // The origin's answer changed (its last 5,000 bytes); a diff that cannot see past the
    // kept bytes must not claim the answers are the same.
    expect(rw.diff.identical).toBe(false);
  });
  it('a gateway key given in set never reaches the origin (the proxy refuses one in a URL or a body)', async () => {
    const r = await fetch(`${t.url}/pub/lookup?token=tok-plain-1`);
    await r.arrayBuffer();
    const id = r.headers.get('x-wake-id') as string;
    const w = await wake(id);
    expect(w.request.query).toMatch(/^\?token=%5Bredacted%3A[0-9a-f]{12}%5D$/);
    const key = `svc_live_${newSecret()}`;
    // Sent by the proxy, this URL is refused 400 before the origin sees it.
    const direct = await fetch(`${t.url}/pub/lookup?token=${key}`);
    await direct.arrayBuffer();
    expect(direct.status).toBe(400);
    seen.length = 0;
    const rp = await api('POST', `/v2/wakes/${id}/replay`, { set: { token: key } });
    await settle();
    expect(seen.map((s) => s.url).join('\n')).not.toContain(key.slice(9));
    // Refused (400 naming set.token would fit the other refusals of set), nothing sent.
    expect(rp.status).toBeGreaterThanOrEqual(400);
    expect(rp.body.error.type).toBeTypeOf('string');
  });
});
