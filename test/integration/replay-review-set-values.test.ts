// Regression tests from a review of wake replay (2026-11-28): what `set` fills, and what reaches the origin.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

interface Seen {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

describe('replay set: values, headers and bytes as the origin gets them', () => {
  let origin: TestServer;
  let t: TestGateway;
  const seen: Seen[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const replay = async (id: string, body: unknown) => {
    const r = await fetch(`${t.url}/v2/wakes/${id}/replay`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await r.text();
    // biome-ignore lint/suspicious/noExplicitAny: read loosely
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = { raw: text };
    }
    return { status: r.status, body: json };
  };
  const nextSeen = async (before: number): Promise<Seen> => {
    for (let i = 0; i < 200 && seen.length === before; i++) await new Promise((r) => setTimeout(r, 20));
    const s = seen[before];
    if (!s) throw new Error('the origin got no replay');
    return s;
  };

  /**
   * docs/api.md: "`set` names ... a redacted header (by name in any case; left out when
   * not given)". Authorization is redacted by default; on an `auth: none` route the
   * proxy passes the client's own Authorization to the origin (dropAuthorization only when
   * a gateway key was checked, proxy/handler.ts). The replayer drops Authorization always
   * (proxy/replay.ts: dropAuthorization: true), after set was accepted: 202, and the
   * origin's own credential the caller supplied is silently not sent.
   */
  it('an Authorization header given in set reaches the origin of an auth: none route, as the original did', async () => {
    const r = await fetch(`${t.url}/open/profile`, { headers: { authorization: 'Bearer origin-own-token-1' } });
    await r.text();
    // Control: the original reached the origin with its own credential.
    expect(seen.at(-1)?.headers.authorization).toBe('Bearer origin-own-token-1');
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const before = seen.length;
    const rep = await replay(id, { set: { authorization: 'Bearer origin-own-token-2' } });
    expect(rep.status).toBe(202);
    const s = await nextSeen(before);
    expect(s.headers.authorization).toBe('Bearer origin-own-token-2');
  });

  /**
   * docs/api.md: "each value is a JSON scalar (string, number, boolean or null)", and
   * "every error is {error: {type, message, param}}" with 400 naming set.<name>. A JSON
   * string holding a lone surrogate ("\ud800") is valid JSON; filling a query parameter
   * with it calls encodeURIComponent (replay/fill.ts fillParams), which throws URIError:
   * the call fails as a 500 after the caller was charged.
   */
  it('a set value holding a lone surrogate for a query parameter is a 202 or a 400 set.token, never a 500', async () => {
    const r = await fetch(`${t.url}/open/search?token=abc&q=1`);
    await r.text();
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const rep = await replay(id, '{"set": {"token": "x\\ud800y"}}');
    expect(rep.status, JSON.stringify(rep.body)).toBeLessThan(500);
    if (rep.status !== 202) expect(rep.body.error).toMatchObject({ type: 'invalid_request', param: 'set.token' });
  });

  /**
   * docs/api.md: "A redaction marker is never sent as if it were the value." A caller
   * who copies the marker out of the wake view (`--set token='[redacted:…]'`, or a
   * script filling every marker it finds with what it finds there) gets 202, and the
   * origin receives the marker text as the token.
   */
  it('a set value that is itself a redaction marker is refused (400 set.token), never sent as the value', async () => {
    const r = await fetch(`${t.url}/open/items?token=abc`);
    await r.text();
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const w = await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json();
    const marker = decodeURIComponent(/token=([^&]*)/.exec(w.request.query)?.[1] ?? '');
    expect(marker).toMatch(/^\[redacted:[0-9a-f]{12}\]$/);
    const before = seen.length;
    const rep = await replay(id, { set: { token: marker } });
    await new Promise((res) => setTimeout(res, 300));
    const sent = seen.slice(before).map((s) => decodeURIComponent(s.url));
    expect(
      sent.filter((u) => u.includes('[redacted:')),
      'a marker reached the origin as the value',
    ).toEqual([]);
    expect(rep.status).toBe(400);
    expect(rep.body.error).toMatchObject({ type: 'invalid_request', param: 'set.token' });
  });

  /**
   * docs/capture.md: "a form's leading byte order mark is no part of its first name";
   * docs/api.md: set names "a query parameter or form field (by its decoded name)". The
   * redactor strips the BOM to match `password`, the filler does not: the 409 names
   * "\ufeffpassword", and set {"password": ...} is refused as naming nothing.
   */
  it('a form body with a leading byte order mark: set {"password": ...} fills its first field', async () => {
    const sent = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('password=hunter3&user=ann')]);
    const r = await fetch(`${t.url}/open/login2`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: sent,
    });
    await r.text();
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const w = await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json();
    expect(JSON.stringify(w.request)).not.toContain('hunter3');
    const before = seen.length;
    const rep = await replay(id, { allow_unsafe: true, set: { password: 'hunter3' } });
    expect(rep.status, JSON.stringify(rep.body)).toBe(202);
    const s = await nextSeen(before);
    expect(s.body.toString('hex')).toBe(sent.toString('hex'));
  });
});
