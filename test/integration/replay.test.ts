import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { queryRows } from '../../src/store/store.js';
import { verifySignature } from '../../src/verify.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { doc, type Json, markedPaths, replaced, scalar } from '../helpers/marked.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

describe('wake detail and replay', () => {
  let origin: TestServer;
  let receiver: Receiver;
  let t: TestGateway;
  let key: string;
  let secret: string;
  let version = 1;
  const seen: { url: string; headers: Record<string, unknown>; body: string }[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        seen.push({ url: req.url ?? '', headers: req.headers, body });
        if (req.url?.startsWith('/api/zipped')) {
          res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
          res.end(gzipSync(JSON.stringify({ ok: true, token: 'tok_zipped_secret' })));
          return;
        }
        if (req.url?.startsWith('/api/items/')) {
          res.writeHead(version === 1 ? 200 : 203, { 'content-type': 'application/json', 'x-version': 'same' });
          res.end(
            JSON.stringify({
              id: 1,
              name: 'widget',
              price: version === 1 ? 10 : 12,
              tags: version === 1 ? ['a'] : ['a', 'b'],
              updated_at: new Date().toISOString() + Math.random(),
            }),
          );
          return;
        }
        res.writeHead(201, { 'content-type': 'application/json', 'set-cookie': 'sid=abc' });
        res.end(JSON.stringify({ ok: true, token: 'tok_secret_value', received: body.length }));
      });
    });
    receiver = await startReceiver();
    t = await startGateway({
      routes: [
        {
          name: 'api',
          prefix: '/api',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url, sandbox: origin.url },
        },
        {
          name: 'small',
          prefix: '/small',
          auth: 'none',
          origins: { production: origin.url },
          capture: { detail: { max_body_bytes: 16 } },
        },
        {
          name: 'mid',
          prefix: '/mid',
          auth: 'none',
          origins: { production: origin.url },
          capture: { detail: { max_body_bytes: 400 } },
        },
        {
          name: 'keep',
          prefix: '/keep',
          auth: 'none',
          origins: { production: origin.url },
          capture: { detail: { opaque_bodies: 'keep' } },
        },
        {
          name: 'bare',
          prefix: '/bare',
          auth: 'none',
          origins: { production: origin.url },
          capture: { detail: { headers: false, bodies: false } },
        },
      ],
      webhooks: { allow_insecure_http: true, allow_private_networks: true },
    });
    key = (
      await t.gw.keys.create(
        { label: 'app', environment: 'production', scopes: ['payments:read', 'payments:write'] },
        'production',
      )
    ).secret;
    const ep = await (
      await fetch(`${t.url}/v2/webhooks/endpoints`, {
        method: 'POST',
        headers: { ...bearer(t.admin), 'content-type': 'application/json' },
        body: JSON.stringify({ url: receiver.url, events: ['replay.finished'] }),
      })
    ).json();
    secret = ep.secret;
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
    await receiver.close();
  });

  const api = (method: string, path: string, body?: unknown, k = t.admin) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(k), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  const wake = async (id: string) => {
    await flushed(t.gw);
    return (await api('GET', `/v2/wakes/${id}`)).json();
  };

  it('keeps the exchange, redacted: the query, headers, bodies; no key secret or password stored anywhere', async () => {
    const sent = JSON.stringify({ item: 'widget', qty: 2, user: { password: 'hunter2-secret', name: 'ann' } });
    const r = await fetch(`${t.url}/api/orders?x=1&api_key=qk_123`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json', 'x-trace': 't1' },
      body: sent,
    });
    expect(r.status).toBe(201);
    const w = await wake(r.headers.get('x-wake-id') as string);
    expect(w.request.query).toMatch(/^\?x=1&api_key=%5Bredacted%3A[0-9a-f]{12}%5D$/);
    const rh = Object.fromEntries(w.request.headers);
    expect(rh.authorization).toMatch(/^\[redacted:[0-9a-f]{12}\]$/);
    expect(rh['x-trace']).toBe('t1');
    const body = JSON.parse(w.request.body);
    expect(body).toMatchObject({ item: 'widget', qty: 2, user: { name: 'ann' } });
    expect(body.user.password).toMatch(/^\[redacted:[0-9a-f]{12}\]$/);
    expect(w.request).toMatchObject({ body_truncated: false, body_encoding: 'utf8' });
    const resh = Object.fromEntries(w.response.headers);
    expect(resh['set-cookie']).toMatch(/^\[redacted:/);
    expect(JSON.parse(w.response.body)).toMatchObject({ ok: true, received: sent.length });
    expect(w.request.body_bytes).toBe(sent.length);
    expect(JSON.parse(w.response.body).token).toMatch(/^\[redacted:/);

    // Nothing stored anywhere holds the key's secret, the password or the token.
    const tables = await queryRows<{ name: string }>(
      t.gw.store,
      'SELECT name FROM system.tables WHERE database = {db:String}',
      {
        db: t.gw.store.db,
      },
    );
    expect(tables.map((x) => x.name)).toContain('wake_details');
    for (const { name } of tables) {
      const rows = JSON.stringify(await queryRows(t.gw.store, `SELECT * FROM ${t.gw.store.db}.${name}`));
      expect(rows, name).not.toContain(key.slice(9));
      expect(rows, name).not.toContain('hunter2-secret');
      expect(rows, name).not.toContain('tok_secret_value');
      expect(rows, name).not.toContain('qk_123');
    }
  });

  it('regression: a password under a key written with JSON escapes ("pass\\u0077ord") is not stored', async () => {
    const sent = '{"user":{"pass\\u0077ord":"hunter3-escaped","name":"ann"}}';
    expect(JSON.parse(sent).user.password).toBe('hunter3-escaped');
    const r = await fetch(`${t.url}/api/orders`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: sent,
    });
    expect(r.status).toBe(201);
    const w = await wake(r.headers.get('x-wake-id') as string);
    expect(JSON.parse(w.request.body).user.password).toMatch(/^\[redacted:[0-9a-f]{12}\]$/);
    const rows = JSON.stringify(await queryRows(t.gw.store, `SELECT * FROM ${t.gw.store.db}.wake_details`));
    expect(rows).toContain('ann');
    expect(rows).not.toContain('hunter3-escaped');
  });

  it('regression: JSON and form bodies sent as text/plain or with no content type are redacted all the same', async () => {
    const send = async (body: string | Uint8Array, contentType?: string) => {
      const r = await fetch(`${t.url}/api/orders`, {
        method: 'POST',
        headers: { ...bearer(key), ...(contentType ? { 'content-type': contentType } : {}) },
        body,
      });
      expect(r.status).toBe(201);
      return wake(r.headers.get('x-wake-id') as string);
    };
    // navigator.sendBeacon and fetch with a string body send JSON as text/plain.
    const plain = await send('{"user":"ann","password":"hunter8-plain"}', 'text/plain;charset=UTF-8');
    expect(plain.request.body).toMatch(/^\{"user":"ann","password":"\[redacted:[0-9a-f]{12}\]"\}$/);
    const untyped = await send(new TextEncoder().encode('{"card_number":"4242-untyped"}'));
    expect(untyped.request.headers.some(([n]: [string, string]) => n.toLowerCase() === 'content-type')).toBe(false);
    expect(untyped.request.body).toMatch(/^\{"card_number":"\[redacted:[0-9a-f]{12}\]"\}$/);
    const form = await send('user=ann&password=hunter8-form', 'text/plain');
    expect(form.request.body).toMatch(/^user=ann&password=%5Bredacted%3A[0-9a-f]{12}%5D$/);
    // JSON inside an HTML page (a framework's embedded state) is text like any other.
    const html = await send('<script>window.__STATE__={"token":"tok-in-html","n":1}</script>', 'text/html');
    expect(html.request.body).toMatch(
      /^<script>window.__STATE__=\{"token":"\[redacted:[0-9a-f]{12}\]","n":1\}<\/script>$/,
    );
    const rows = JSON.stringify(await queryRows(t.gw.store, `SELECT * FROM ${t.gw.store.db}.wake_details`));
    for (const s of ['hunter8-plain', '4242-untyped', 'hunter8-form', 'tok-in-html']) expect(rows).not.toContain(s);
  });

  it('regression: a gateway key written with JSON escapes in a body cut short is not stored', async () => {
    const escaped = [...key]
      .map((c, i) => (i % 2 ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : c))
      .join('');
    // Past the route's 400-byte cap: the body is kept cut short, so it cannot be parsed.
    const sent = `{"note":"${escaped}","pad":"${'x'.repeat(600)}"}`;
    expect(JSON.parse(sent).note).toBe(key);
    const r = await fetch(`${t.url}/mid/notes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: sent,
    });
    // Never forwarded (issue #34, item 10: a key in a body, in any spelling, is refused); its wake is kept.
    expect(r.status).toBe(400);
    const w = await wake(r.headers.get('x-wake-id') as string);
    expect(w.request.body_truncated).toBe(true);
    expect(w.request.body).toMatch(/^\{"note":"\[redacted:[0-9a-f]{12}\]","pad":"x+$/);
    const secretPart = key.slice('svc_live_'.length);
    const rows = JSON.stringify(await queryRows(t.gw.store, `SELECT * FROM ${t.gw.store.db}.wake_details`));
    const decoded = rows.replace(/\\+u([0-9a-fA-F]{4})/g, (_m, h: string) =>
      String.fromCharCode(Number.parseInt(h, 16)),
    );
    expect(decoded).not.toContain(secretPart.slice(0, 20));
  });

  it('regression: a nested form or query field ("user[password]", Rails and PHP style) is redacted', async () => {
    const r = await fetch(`${t.url}/api/orders?user%5Btoken%5D=tok-nested-q&page=2`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/x-www-form-urlencoded' },
      body: 'user[name]=ann&user[password]=hunter6-nested&items[][qty]=2',
    });
    expect(r.status).toBe(201);
    const w = await wake(r.headers.get('x-wake-id') as string);
    expect(w.request.query).toMatch(/^\?user%5Btoken%5D=%5Bredacted%3A[0-9a-f]{12}%5D&page=2$/);
    expect(w.request.body).toMatch(
      /^user\[name\]=ann&user\[password\]=%5Bredacted%3A[0-9a-f]{12}%5D&items\[\]\[qty\]=2$/,
    );
    const rows = JSON.stringify(await queryRows(t.gw.store, `SELECT * FROM ${t.gw.store.db}.wake_details`));
    expect(rows).not.toContain('hunter6-nested');
    expect(rows).not.toContain('tok-nested-q');
  });

  it('regression: multipart form fields are redacted (a browser FormData login), beside a binary file part', async () => {
    const form = new FormData();
    form.append('user', 'ann');
    form.append('password', 'hunter7-multi');
    form.append('account[token]', 'tok-multi-nested');
    form.append('avatar', new Blob([Buffer.from([0xff, 0xd8, 0xff, 0x00, 0x81])]), 'a.jpg');
    // A binary part makes the body one the redactor cannot wholly read: by default only its size and hash are kept.
    const hashed = await fetch(`${t.url}/api/orders`, { method: 'POST', headers: bearer(key), body: form });
    expect(hashed.status).toBe(201);
    const hw = await wake(hashed.headers.get('x-wake-id') as string);
    expect(hw.request).toMatchObject({ body: null, body_encoding: 'omitted', body_sha256: expect.any(String) });
    expect(hw.request.body_omitted_reason).toMatch(/binary/);
    // With opaque_bodies: keep, what it can read is redacted and the rest kept.
    const r = await fetch(`${t.url}/keep/orders`, { method: 'POST', body: form });
    expect(r.status).toBe(201);
    const w = await wake(r.headers.get('x-wake-id') as string);
    const kept = Buffer.from(w.request.body, w.request.body_encoding === 'base64' ? 'base64' : 'utf8').toString(
      'latin1',
    );
    expect(kept).toMatch(/name="user"\r\n\r\nann\r\n/);
    expect(kept).toMatch(/name="password"\r\n\r\n\[redacted:[0-9a-f]{12}\]\r\n/);
    expect(kept).toContain('\xff\xd8\xff\x00\x81');
    expect(kept).not.toContain('hunter7-multi');
    expect(kept).not.toContain('tok-multi-nested');
  });

  it('regression: compressed bodies are redacted inside (a gzipped password or token is not stored), and kept compressed', async () => {
    const sent = gzipSync(JSON.stringify({ user: { password: 'hunter4-zipped', name: 'ann' } }));
    const r = await fetch(`${t.url}/api/zipped`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: sent,
    });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ ok: true, token: 'tok_zipped_secret' });
    const w = await wake(r.headers.get('x-wake-id') as string);
    // Stored as sent (compressed, so base64), with the named field redacted inside.
    expect(w.request).toMatchObject({ body_encoding: 'base64', body_truncated: false, body_bytes: sent.length });
    const req = JSON.parse(gunzipSync(Buffer.from(w.request.body, 'base64')).toString());
    expect(req.user).toEqual({ password: expect.stringMatching(/^\[redacted:[0-9a-f]{12}\]$/), name: 'ann' });
    const res = JSON.parse(gunzipSync(Buffer.from(w.response.body, 'base64')).toString());
    expect(res).toEqual({ ok: true, token: expect.stringMatching(/^\[redacted:/) });
    // A compressed body cut short cannot be read, so nothing of it is kept.
    const big = gzipSync(JSON.stringify({ password: 'hunter5-cut', pad: 'p'.repeat(2000) }));
    const c = await fetch(`${t.url}/small/zipped`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: big,
    });
    expect(c.status).toBe(201);
    await c.arrayBuffer();
    const cw = await wake(c.headers.get('x-wake-id') as string);
    expect(cw.request).toMatchObject({
      body: null,
      body_encoding: 'omitted',
      body_truncated: true,
      body_bytes: big.length,
    });
    const rows = await queryRows<Record<string, string>>(
      t.gw.store,
      `SELECT request_body, request_body_encoding, response_body, response_body_encoding FROM ${t.gw.store.db}.wake_details`,
    );
    for (const row of rows)
      for (const side of ['request', 'response']) {
        const raw = Buffer.from(
          row[`${side}_body`] as string,
          row[`${side}_body_encoding`] === 'base64' ? 'base64' : 'utf8',
        );
        let text = raw.toString('latin1');
        try {
          text += gunzipSync(raw).toString();
        } catch {
          // Not gzip.
        }
        expect(text).not.toContain('hunter4-zipped');
        expect(text).not.toContain('hunter5-cut');
        expect(text).not.toContain('tok_zipped_secret');
      }
  });

  it('replays a GET whose origin now answers differently: the diff names status and JSON paths; replay.finished is signed', async () => {
    version = 1;
    const r = await fetch(`${t.url}/api/items/1`, { headers: bearer(key) });
    const original = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    version = 2;
    seen.length = 0;
    const rep = await api('POST', `/v2/wakes/${original}/replay`, { ignore: ['updated_at'] });
    expect(rep.status).toBe(202);
    const started = await rep.json();
    expect(started).toMatchObject({ object: 'replay', wake_id: original, status: 'pending' });
    await until(() => receiver.got.some((g) => g.body.includes(started.replay_wake_id)), 5000);
    const got = receiver.got.find((g) => g.body.includes(started.replay_wake_id));
    expect(verifySignature(got?.body ?? '', got?.headers['x-service-signature'] as string, secret)).toBe(true);
    const ev = JSON.parse(got?.body ?? '{}');
    expect(ev.type).toBe('replay.finished');
    expect(ev.data.diff.identical).toBe(false);
    expect(ev.data.diff.status).toEqual({ before: 200, after: 203 });
    expect(ev.data.diff.body).toEqual([
      { path: '$.price', before: 10, after: 12 },
      { path: '$.tags[1]', after: 'b' },
    ]);
    expect(ev.data.diff.ignored).toEqual(['$.updated_at']);
    // The origin saw the replay marked, with the original key's identity and no credentials.
    expect(seen[0]?.headers['x-wakegate-replay-of']).toBe(original);
    expect(seen[0]?.headers['x-wakegate-key-id']).toMatch(/^key_/);
    expect(seen[0]?.headers.authorization).toBeUndefined();
    const rw = await wake(started.replay_wake_id);
    expect(rw).toMatchObject({ replay_of: original, status: 203, route: 'api' });
    expect(rw.diff).toEqual(ev.data.diff);
  });

  it('an unchanged origin gives identical: true although date, x-wake-id and an ignored field differ', async () => {
    version = 1;
    const r = await fetch(`${t.url}/api/items/1`, { headers: bearer(key) });
    const original = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    await new Promise((res) => setTimeout(res, 1100)); // a new Date header second
    const rep = await (await api('POST', `/v2/wakes/${original}/replay`, { ignore: ['updated_at'] })).json();
    await until(() => receiver.got.some((g) => g.body.includes(rep.replay_wake_id)), 5000);
    const ev = JSON.parse(receiver.got.find((g) => g.body.includes(rep.replay_wake_id))?.body ?? '{}');
    expect(ev.data.diff).toMatchObject({ identical: true, status: null, headers: [], body: [] });
    expect(ev.data.diff.ignored).toEqual(['$.updated_at']);
  });

  it('refuses: an unsafe method without allow_unsafe, a body not captured whole, no detail, another environment', async () => {
    const post = await fetch(`${t.url}/api/orders`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: '{"a":1}',
    });
    const pid = post.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const unsafe = await api('POST', `/v2/wakes/${pid}/replay`, {});
    expect(unsafe.status).toBe(422);
    expect((await unsafe.json()).error.param).toBe('allow_unsafe');
    expect((await api('POST', `/v2/wakes/${pid}/replay`, { allow_unsafe: true })).status).toBe(202);

    const big = await fetch(`${t.url}/small/upload`, { method: 'POST', body: 'x'.repeat(100) });
    const bare = await fetch(`${t.url}/bare/thing`);
    await flushed(t.gw);
    const cut = await api('POST', `/v2/wakes/${big.headers.get('x-wake-id')}/replay`, { allow_unsafe: true });
    expect(cut.status).toBe(409);
    expect((await cut.json()).error.message).toMatch(/not captured whole/);
    const none = await api('POST', `/v2/wakes/${bare.headers.get('x-wake-id')}/replay`, {});
    expect(none.status).toBe(409);
    expect((await none.json()).error.message).toMatch(/kept no detail/);

    const sb = (await t.gw.keys.create({ label: 'sb', environment: 'sandbox', scopes: ['wakes:write'] }, 'sandbox'))
      .secret;
    expect((await api('POST', `/v2/wakes/${pid}/replay`, { allow_unsafe: true }, sb)).status).toBe(404);
    const readOnly = (
      await t.gw.keys.create({ label: 'ro', environment: 'production', scopes: ['wakes:read'] }, 'production')
    ).secret;
    expect((await api('POST', `/v2/wakes/${pid}/replay`, {}, readOnly)).status).toBe(403);
    expect((await api('POST', `/v2/wakes/${pid}/replay`, { bogus: 1 })).status).toBe(400);
    // A body cut at max_body_bytes says so.
    const w = await wake(big.headers.get('x-wake-id') as string);
    expect(w.request).toMatchObject({ body: 'x'.repeat(16), body_bytes: 100, body_truncated: true });
    const b = await wake(bare.headers.get('x-wake-id') as string);
    expect(b.request).toBeNull();
  });
});

const MARKER = /^\[redacted:[0-9a-f]{12}\]$/;

describe('replay: set fills redacted values only, and its markers are no oracle (issue #34 item 9)', () => {
  let origin: TestServer;
  let t: TestGateway;
  let buyer: string;
  const seen: { url: string; method: string; body: string }[] = [];

  beforeAll(async () => {
    // Echoes the cvc it received in a redacted field, beside a session token that never changes.
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        seen.push({ url: req.url ?? '', method: req.method ?? '', body });
        let cvc: unknown = null;
        try {
          cvc = JSON.parse(body).card?.cvc ?? null;
        } catch {
          // Not JSON (a GET).
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ok: true, cvc, token: 'tok_same_every_time' }));
      });
    });
    t = await startGateway({
      routes: [
        {
          name: 'pay',
          prefix: '/pay',
          scopes: { read: 'pay:read', write: 'pay:write' },
          origins: { production: origin.url },
        },
      ],
    });
    buyer = (
      await t.gw.keys.create(
        { label: 'buyer', environment: 'production', scopes: ['pay:read', 'pay:write'] },
        'production',
      )
    ).secret;
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const api = (path: string, body: unknown) =>
    fetch(`${t.url}${path}`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const pay = async (body: unknown): Promise<string> => {
    const r = await fetch(`${t.url}/pay/charge`, {
      method: 'POST',
      headers: { ...bearer(buyer), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(r.status).toBe(200);
    await r.arrayBuffer();
    return r.headers.get('x-wake-id') as string;
  };
  const wake = async (id: string) => {
    await flushed(t.gw);
    return (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json();
  };
  /** The replay's wake once it is written with its diff. */
  const replayed = async (id: string) => {
    // biome-ignore lint/suspicious/noExplicitAny: the tests read API answers loosely
    let w: any = null;
    await until(
      async () => {
        w = await wake(id);
        return w?.diff != null;
      },
      10_000,
      `replay wake ${id}`,
    );
    return w;
  };

  it('regression: guesses sent in set never get the original marker, on the request nor echoed in the answer (a CVC recovered in 3 replays)', async () => {
    const id = await pay({ amount: 5, card: { cvc: '731' } });
    const orig = await wake(id);
    const marker = JSON.parse(orig.request.body).card.cvc;
    const echoed = JSON.parse(orig.response.body).cvc;
    expect(marker).toMatch(MARKER);
    expect(echoed).toBe(marker); // the same value in one wake is marked alike
    const before = seen.length;
    const markers = new Set<string>();
    for (const guess of ['730', '731', '732']) {
      const r = await api(`/v2/wakes/${id}/replay`, { allow_unsafe: true, set: { '$.card.cvc': guess } });
      expect(r.status).toBe(202);
      const rw = await replayed((await r.json()).replay_wake_id);
      const m = JSON.parse(rw.request.body).card.cvc;
      expect(m).toMatch(MARKER);
      expect(m, `guess ${guess}`).not.toBe(marker);
      expect(JSON.parse(rw.response.body).cvc, `guess ${guess} echoed`).not.toBe(echoed);
      markers.add(m);
    }
    expect(markers.size).toBe(3);
    // The origin got the guesses, not markers.
    expect(seen.slice(before).map((s) => JSON.parse(s.body).card.cvc)).toEqual(['730', '731', '732']);
  });

  it('equal values in two unrelated wakes get unrelated markers', async () => {
    const a = await wake(await pay({ amount: 1, card: { cvc: '999' } }));
    const b = await wake(await pay({ amount: 1, card: { cvc: '999' } }));
    const ma = JSON.parse(a.request.body).card.cvc;
    const mb = JSON.parse(b.request.body).card.cvc;
    expect(ma).toMatch(MARKER);
    expect(mb).toMatch(MARKER);
    expect(ma).not.toBe(mb);
  });

  it('a replay without set and its original are marked alike: the diff is identical', async () => {
    const r = await fetch(`${t.url}/pay/session?x=1`, { headers: bearer(buyer) });
    await r.arrayBuffer();
    const id = r.headers.get('x-wake-id') as string;
    const orig = await wake(id);
    const token = JSON.parse(orig.response.body).token;
    expect(token).toMatch(MARKER);
    const rep = await api(`/v2/wakes/${id}/replay`, {});
    expect(rep.status).toBe(202);
    const rw = await replayed((await rep.json()).replay_wake_id);
    expect(rw.diff).toMatchObject({ identical: true, status: null, headers: [], body: [] });
    expect(JSON.parse(rw.response.body).token).toBe(token);
  });

  it('regression: set fills redacted values only: $, a whole object, a field not redacted, a value not a scalar are 400 set.<name>, and nothing is sent', async () => {
    const id = await pay({ amount: 5, card: { cvc: '731', card_number: '4242424242424242' } });
    await flushed(t.gw);
    const full = { '$.card.cvc': '1', '$.card.card_number': '2' };
    const before = seen.length;
    const cases: [Record<string, unknown>, string][] = [
      [{ $: '{"amount":5000,"card":{"cvc":"1"}}' }, 'set.$'],
      [{ ...full, $: '{}' }, 'set.$'],
      [{ '$.card': { cvc: '1', card_number: '2' } }, 'set.$.card'],
      [{ '$.card': 'x' }, 'set.$.card'],
      [{ ...full, '$.amount': 5000 }, 'set.$.amount'],
      [{ ...full, '$.card.cvc': { x: 1 } }, 'set.$.card.cvc'],
      [{ ...full, '$.card.cvc': ['1'] }, 'set.$.card.cvc'],
      [{ ...full, nope: 1 }, 'set.nope'],
    ];
    for (const [set, param] of cases) {
      const r = await api(`/v2/wakes/${id}/replay`, { allow_unsafe: true, set });
      const body = await r.json();
      expect(r.status, JSON.stringify(set)).toBe(400);
      expect(body.error, JSON.stringify(set)).toMatchObject({ type: 'invalid_request', param });
    }
    // One value short: 409 naming what is missing, param set.
    const short = await api(`/v2/wakes/${id}/replay`, { allow_unsafe: true, set: { '$.card.cvc': '1' } });
    expect(short.status).toBe(409);
    const err = (await short.json()).error;
    expect(err).toMatchObject({ type: 'conflict', param: 'set' });
    expect(err.message).toContain('$.card.card_number');
    expect(seen.length).toBe(before);
    // Complete: sent with exactly the captured body, the redacted values filled.
    const ok = await api(`/v2/wakes/${id}/replay`, { allow_unsafe: true, set: full });
    expect(ok.status).toBe(202);
    await until(() => seen.length === before + 1, 10_000, 'the replay at the origin');
    expect(JSON.parse(seen[before]?.body ?? '')).toEqual({ amount: 5, card: { cvc: '1', card_number: '2' } });
  });

  it("regression: a form body's marker (stored percent-encoded) is never sent: 409 naming it, then sent as set gives it", async () => {
    const r = await fetch(`${t.url}/pay/form`, {
      method: 'POST',
      headers: { ...bearer(buyer), 'content-type': 'application/x-www-form-urlencoded' },
      body: 'user=ann&password=hunter2-form',
    });
    await r.arrayBuffer();
    const id = r.headers.get('x-wake-id') as string;
    expect((await wake(id)).request.body).toMatch(/^user=ann&password=%5Bredacted%3A[0-9a-f]{12}%5D$/);
    const before = seen.length;
    const refused = await api(`/v2/wakes/${id}/replay`, { allow_unsafe: true });
    expect(refused.status).toBe(409);
    const err = (await refused.json()).error;
    expect(err).toMatchObject({ type: 'conflict', param: 'set' });
    expect(err.message).toContain('password');
    expect(seen.length).toBe(before);
    const ok = await api(`/v2/wakes/${id}/replay`, { allow_unsafe: true, set: { password: 'p w' } });
    expect(ok.status).toBe(202);
    await until(() => seen.length === before + 1, 10_000, 'the replay at the origin');
    expect(seen[before]?.body).toBe('user=ann&password=p%20w');
  });

  it('property, through the listener: a replay is refused naming set.<name>, or sends exactly the captured body with only the redacted values filled, and never marks a set value as the original', async () => {
    await fc.assert(
      fc.asyncProperty(
        doc,
        fc.array(fc.oneof(scalar, fc.constant('__original__')), { minLength: 8, maxLength: 8 }),
        fc.constantFrom('none', 'none', 'drop-one', '$', 'object', 'unredacted', 'unknown'),
        async (plain, picks, extra) => {
          const id = await pay(plain);
          const orig = await wake(id);
          const paths = markedPaths(JSON.parse(orig.request.body) as Json, plain);
          const set: Record<string, unknown> = {};
          [...paths.keys()].forEach((p, i) => {
            const pick = picks[i % picks.length];
            set[p] = pick === '__original__' ? paths.get(p) : pick; // the original value: the oracle attack
          });
          const first = Object.keys(set)[0];
          if (extra === 'drop-one' && first !== undefined) delete set[first];
          else if (extra === '$') set.$ = '{}';
          else if (extra === 'object') set[first ?? '$.card'] = { x: 1 };
          else if (extra === 'unredacted') set['$.amount'] = 1;
          else if (extra === 'unknown') set.nope = 'x';
          const invalid = Object.entries(set)
            .filter(([n, v]) => n === '$' || (v !== null && typeof v === 'object') || !paths.has(n))
            .map(([n]) => n);
          const before = seen.length;
          const r = await api(`/v2/wakes/${id}/replay`, { allow_unsafe: true, set });
          const answer = await r.json();
          if (invalid.length > 0) {
            expect(r.status).toBe(400);
            expect(invalid.map((n) => `set.${n}`)).toContain(answer.error.param);
          } else if ([...paths.keys()].some((p) => !Object.hasOwn(set, p))) {
            expect(r.status).toBe(409);
            expect(answer.error.param).toBe('set');
          } else {
            expect(r.status).toBe(202);
            const rw = await replayed(answer.replay_wake_id);
            expect(seen.length).toBe(before + 1);
            expect(JSON.parse(seen[before]?.body ?? '')).toEqual(replaced(plain, set, new Set(paths.keys())));
            const was = markedPaths(JSON.parse(orig.request.body) as Json, JSON.parse(orig.request.body) as Json);
            const now = JSON.parse(rw.request.body) as Json;
            for (const [p, m] of markedPaths(now, now)) expect(m, p).not.toBe(was.get(p));
            return;
          }
          expect(seen.length).toBe(before);
        },
      ),
      { numRuns: 15 },
    );
  }, 120_000);
});

describe('a replay is admitted against the routes in force now (issue #34 item 9)', () => {
  it('regression: a path a new config puts under a stricter route needs that route scope and goes to its origin; 409 when no route matches', async () => {
    const hits: { tag: string; url: string }[] = [];
    const recording = (tag: string) =>
      startServer((req, res) => {
        hits.push({ tag, url: req.url ?? '' });
        req.resume();
        req.on('end', () => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ tag }));
        });
      });
    const a = await recording('a');
    const b = await recording('b');
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-replay-routes-'));
    const admin = `svc_live_${newSecret()}`;
    const api = {
      name: 'api',
      prefix: '/api',
      scopes: { read: 'api:read', write: 'api:write' },
      origins: { production: a.url },
    };
    // An admin route elsewhere, so the admin scopes exist for keys from the start.
    const elsewhere = {
      name: 'console',
      prefix: '/console-admin',
      scopes: { read: 'admin:read', write: 'admin:write' },
      origins: { production: b.url },
    };
    let t = await startGateway({ routes: [elsewhere, api] }, { dir, admin });
    try {
      const key = async (label: string, scopes: string[]) =>
        (await t.gw.keys.create({ label, environment: 'production', scopes }, 'production')).secret;
      // The original key may read the admin route too: a replay is sent as it (checked below).
      const user = await key('user', ['api:read', 'admin:read']);
      const apiReplayer = await key('api-replayer', ['wakes:write', 'api:read']);
      const r = await fetch(`${t.url}/api/admin/users`, { headers: bearer(user) });
      expect(r.status).toBe(200);
      await r.arrayBuffer();
      const id = r.headers.get('x-wake-id') as string;
      await flushed(t.gw);
      await t.stop();

      // The new config puts /api/admin under a stricter route, with another origin.
      const stricter = {
        name: 'admin',
        prefix: '/api/admin',
        scopes: { read: 'admin:read', write: 'admin:write' },
        origins: { production: b.url },
      };
      t = await startGateway({ routes: [stricter, api] }, { dir, admin });
      const adminReplayer = await key('admin-replayer', ['wakes:write', 'admin:read']);
      const replay = (k: string) =>
        fetch(`${t.url}/v2/wakes/${id}/replay`, {
          method: 'POST',
          headers: { ...bearer(k), 'content-type': 'application/json' },
          body: '{}',
        });
      const before = hits.length;
      const refused = await replay(apiReplayer);
      expect(refused.status).toBe(403);
      const err = (await refused.json()).error;
      expect(err.type).toBe('insufficient_scope');
      expect(err.message).toContain('admin:read');
      expect(hits.length).toBe(before);
      const ok = await replay(adminReplayer);
      expect(ok.status).toBe(202);
      const rid = (await ok.json()).replay_wake_id;
      await until(() => hits.length === before + 1, 10_000, 'the replay at an origin');
      expect(hits[before]).toEqual({ tag: 'b', url: '/api/admin/users' });
      await until(
        async () => {
          await flushed(t.gw);
          return (await fetch(`${t.url}/v2/wakes/${rid}`, { headers: bearer(admin) })).status === 200;
        },
        10_000,
        'the replay wake',
      );
      const rw = await (await fetch(`${t.url}/v2/wakes/${rid}`, { headers: bearer(admin) })).json();
      expect(rw).toMatchObject({ replay_of: id, route: 'admin' });
      await t.stop();

      // No route matches the path any more: 409, nothing sent.
      t = await startGateway(
        { routes: [{ name: 'other', prefix: '/other', auth: 'none', origins: { production: a.url } }] },
        { dir, admin },
      );
      const gone = await replay(admin);
      expect(gone.status).toBe(409);
      expect((await gone.json()).error.message).toMatch(/no route/);
      expect(hits.length).toBe(before + 1);
    } finally {
      await t.cleanup();
      await a.close();
      await b.close();
    }
  });
});

describe('a replay is sent as its original key only when that key may send it today (review of issue #34)', () => {
  /** An origin that records the identity headers each request reached it with. */
  const recordingOrigin = async () => {
    const hits: { url: string; headers: Record<string, unknown> }[] = [];
    const server = await startServer((req, res) => {
      hits.push({ url: req.url ?? '', headers: req.headers });
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    return { server, hits };
  };
  const replayAs = (base: string, k: string, id: string, body = '{"allow_unsafe":true}') =>
    fetch(`${base}/v2/wakes/${id}/replay`, {
      method: 'POST',
      headers: { ...bearer(k), 'content-type': 'application/json' },
      body,
    });

  it('regression: a POST captured under a laxer route is refused (409) when its key lacks the scope of the route that matches today, whoever replays it', async () => {
    const { server, hits } = await recordingOrigin();
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-replay-original-'));
    const admin = `svc_live_${newSecret()}`;
    const api = {
      name: 'api',
      prefix: '/api',
      scopes: { read: 'api:read', write: 'api:write' },
      origins: { production: server.url },
    };
    const payments = (prefix: string) => ({
      name: 'payments',
      prefix,
      scopes: { read: 'payments:read', write: 'payments:write' },
      origins: { production: server.url },
    });
    let t = await startGateway({ routes: [payments('/pay'), api] }, { dir, admin });
    try {
      const key = async (label: string, scopes: string[]) =>
        t.gw.keys.create({ label, environment: 'production', scopes }, 'production');
      const x = await key('x-api-only', ['api:write']);
      const y = await key('y-payments-too', ['api:write', 'payments:write']);
      const post = async (secret: string) => {
        const r = await fetch(`${t.url}/api/payments/charge`, {
          method: 'POST',
          headers: { ...bearer(secret), 'content-type': 'application/json' },
          body: '{"amount":5}',
        });
        expect(r.status).toBe(200);
        await r.arrayBuffer();
        return r.headers.get('x-wake-id') as string;
      };
      const byX = await post(x.secret);
      const byY = await post(y.secret);
      await flushed(t.gw);
      await t.stop();

      // The new config puts /api/payments under the payments route, which X could never reach.
      t = await startGateway({ routes: [payments('/api/payments'), api] }, { dir, admin });
      const payer = (await key('payer', ['wakes:write', 'payments:write'])).secret;
      const before = hits.length;
      const refused = await replayAs(t.url, payer, byX);
      expect(refused.status).toBe(409);
      const err = (await refused.json()).error;
      expect(err.type).toBe('conflict');
      expect(err.message).toContain(x.key.id);
      expect(err.message).toContain('payments:write');
      // The key that holds the scope today is still replayed as itself.
      const ok = await replayAs(t.url, payer, byY);
      expect(ok.status).toBe(202);
      await until(() => hits.length === before + 1, 10_000, 'the replay at the origin');
      expect(hits[before]?.url).toBe('/api/payments/charge');
      expect(hits[before]?.headers['x-wakegate-key-id']).toBe(y.key.id);
      expect(hits.some((h, i) => i >= before && h.headers['x-wakegate-key-id'] === x.key.id)).toBe(false);
    } finally {
      await t.cleanup();
      await server.close();
    }
  });

  it('regression: a wake of an auth: none route is refused (409) once its path is under auth: required; nothing reaches the origin unidentified', async () => {
    const { server, hits } = await recordingOrigin();
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-replay-anon-'));
    const admin = `svc_live_${newSecret()}`;
    const open = (auth: string) => ({
      name: 'ledger',
      prefix: '/ledger',
      auth,
      ...(auth === 'none' ? {} : { scopes: { read: 'ledger:read', write: 'ledger:write' } }),
      origins: { production: server.url },
    });
    let t = await startGateway({ routes: [open('none')] }, { dir, admin });
    try {
      const r = await fetch(`${t.url}/ledger/entries`, { headers: { 'x-consumer-id': 'billing-service' } });
      expect(r.status).toBe(200);
      await r.arrayBuffer();
      const id = r.headers.get('x-wake-id') as string;
      await flushed(t.gw);
      await t.stop();

      t = await startGateway({ routes: [open('required')] }, { dir, admin });
      const replayer = (
        await t.gw.keys.create(
          { label: 'replayer', environment: 'production', scopes: ['wakes:write', 'ledger:read'] },
          'production',
        )
      ).secret;
      const before = hits.length;
      const refused = await replayAs(t.url, replayer, id, '{}');
      expect(refused.status).toBe(409);
      const err = (await refused.json()).error;
      expect(err.type).toBe('conflict');
      expect(err.message).toMatch(/without a key/);
      expect(err.message).toContain('ledger');
      expect(hits.length).toBe(before);
      await t.stop();

      // Under auth: optional a keyless request is one anyone may send: the replay goes, unidentified as the original was.
      t = await startGateway({ routes: [open('optional')] }, { dir, admin });
      const ok = await replayAs(t.url, replayer, id, '{}');
      expect(ok.status).toBe(202);
      await until(() => hits.length === before + 1, 10_000, 'the replay at the origin');
      expect(hits[before]?.headers['x-wakegate-key-id']).toBeUndefined();
    } finally {
      await t.cleanup();
      await server.close();
    }
  });
});

describe('property: a replay goes exactly when its original sender could send it today (review of issue #34)', () => {
  it('random keys, methods and paths captured under one config, replayed under another: 202 iff the live rules admit the original sender, with its identity or none', async () => {
    const hits: Record<string, unknown>[] = [];
    const server = await startServer((req, res) => {
      hits.push(req.headers);
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    const at = { production: server.url };
    const s = { read: 's:read', write: 's:write' };
    const before = [
      { name: 'wide', prefix: '/x', auth: 'optional', scopes: { read: 'w:read', write: 'w:write' }, origins: at },
      { name: 'open', prefix: '/n', auth: 'none', origins: at },
      { name: 'strict', prefix: '/elsewhere', scopes: s, origins: at },
    ];
    type R = { name: string; prefix: string; auth: string; scopes?: { read: string; write: string } };
    const after: R[] = [
      { name: 'strict', prefix: '/x/s', auth: 'required', scopes: s },
      { name: 'opt', prefix: '/x/o', auth: 'optional', scopes: s },
      { name: 'wide', prefix: '/x', auth: 'optional', scopes: { read: 'w:read', write: 'w:write' } },
      { name: 'closed', prefix: '/n/r', auth: 'required', scopes: s },
      { name: 'open', prefix: '/n', auth: 'none' },
    ];
    const SCOPES = ['w:read', 'w:write', 's:read', 's:write'];
    const seed = Date.now();
    const [keyScopes] = fc.sample(fc.array(fc.subarray(SCOPES, { minLength: 1 }), { minLength: 4, maxLength: 4 }), {
      numRuns: 1,
      seed,
    }) as [string[][]];
    const cases = fc.sample(
      fc.record({
        path: fc.constantFrom('/x/s/1', '/x/o/1', '/x/w/1', '/n/r/1', '/n/z/1'),
        method: fc.constantFrom('GET', 'POST'),
        sender: fc.integer({ min: -1, max: 3 }), // -1: no key
      }),
      { numRuns: 24, seed: seed + 1 },
    );
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-replay-prop-'));
    const admin = `svc_live_${newSecret()}`;
    let t = await startGateway({ routes: before }, { dir, admin });
    try {
      const keys = [];
      for (const [i, scopes] of keyScopes.entries())
        keys.push(await t.gw.keys.create({ label: `k${i}`, environment: 'production', scopes }, 'production'));
      const sent: { id: string; keyId: string | null; scopes: string[]; path: string; method: string }[] = [];
      for (const c of cases) {
        const k = c.sender >= 0 ? keys[c.sender] : undefined;
        const r = await fetch(`${t.url}${c.path}`, {
          method: c.method,
          headers: {
            ...(k ? bearer(k.secret) : {}),
            ...(c.method === 'POST' ? { 'content-type': 'application/json' } : {}),
          },
          body: c.method === 'POST' ? '{"a":1}' : undefined,
        });
        await r.arrayBuffer();
        if (r.status !== 200) continue; // refused live: nothing to replay
        // An auth: none route never reads the key: its wake has none.
        const keyed = k !== undefined && c.path.startsWith('/x');
        sent.push({
          id: r.headers.get('x-wake-id') as string,
          keyId: keyed ? k.key.id : null,
          scopes: keyed ? k.key.scopes : [],
          path: c.path,
          method: c.method,
        });
      }
      expect(sent.length).toBeGreaterThan(0);
      await flushed(t.gw);
      await t.stop();

      t = await startGateway({ routes: after.map((r) => ({ ...r, origins: at })) }, { dir, admin });
      const replayer = (
        await t.gw.keys.create(
          { label: 'replayer', environment: 'production', scopes: ['wakes:write', ...SCOPES] },
          'production',
        )
      ).secret;
      for (const w of sent) {
        const route = after.find((r) => w.path.startsWith(`${r.prefix}/`)) as R;
        const needed = route.scopes ? (w.method === 'GET' ? route.scopes.read : route.scopes.write) : null;
        const admitted = w.keyId !== null ? needed === null || w.scopes.includes(needed) : route.auth !== 'required';
        const n = hits.length;
        const r = await fetch(`${t.url}/v2/wakes/${w.id}/replay`, {
          method: 'POST',
          headers: { ...bearer(replayer), 'content-type': 'application/json' },
          body: '{"allow_unsafe":true}',
        });
        const what = `seed ${seed}: ${JSON.stringify(w)} under ${route.name}`;
        expect(r.status, what).toBe(admitted ? 202 : 409);
        await r.arrayBuffer();
        if (!admitted) continue;
        await until(() => hits.length === n + 1, 10_000, 'the replay at the origin');
        expect(hits[n]?.['x-wakegate-key-id'], what).toBe(w.keyId ?? undefined);
      }
      expect(hits.length).toBeGreaterThan(0);
    } finally {
      await t.cleanup();
      await server.close();
    }
  }, 120_000);
});
