import { randomBytes } from 'node:crypto';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { appReadings, headerOf, type Received, recordingOrigin, reveals, sendInPieces } from '../helpers/app-decode.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { cuts, keyBody, split } from '../helpers/key-spellings.js';
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

/** Issue #34, item 10: a key in a spelling the origin's application decodes never reaches it. */
describe('gateway keys in the spellings applications decode', () => {
  let rec: Awaited<ReturnType<typeof recordingOrigin>>;
  let t: TestGateway;
  const secret = `svc_live_${newSecret()}`;
  const spell = (s: string, c: string, as: string) => s.replace(c, as);

  beforeAll(async () => {
    rec = await recordingOrigin();
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: rec.origin.url } }],
      capture: { detail: { max_per_second: 0 } },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await rec.origin.close();
  });

  const post = (body: Buffer | string, headers: Record<string, string>) =>
    fetch(`${t.url}/open/in`, { method: 'POST', body, headers });
  const json = { 'content-type': 'application/json' };
  const refusedUnseen = async (r: Response, before: number, param = 'body') => {
    const e = (await r.json()) as { error: { type: string; param: string } };
    expect(r.status, JSON.stringify(e)).toBe(400);
    expect(e.error.param).toBe(param);
    expect(rec.seen.length).toBe(before);
  };
  const utf16le = (s: string) => Buffer.from(s, 'utf16le');
  const utf32be = (s: string) => {
    const b = Buffer.alloc(s.length * 4);
    for (let i = 0; i < s.length; i++) b.writeUInt32BE(s.charCodeAt(i), i * 4);
    return b;
  };

  it.each([
    ['JSON \\u0073 escapes', JSON.stringify({ k: 'x' }).replace('x', spell(secret, 's', '\\u0073')), json],
    [
      'JSON \\u escapes of every character',
      JSON.stringify({ k: 'x' }).replace(
        'x',
        [...secret].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join(''),
      ),
      json,
    ],
    [
      'a form value %73vc_',
      `a=1&note=${spell(secret, 's', '%73')}`,
      { 'content-type': 'application/x-www-form-urlencoded' },
    ],
    [
      'a form value holding an escaped JSON escape',
      `p=${encodeURIComponent(JSON.stringify({ k: spell(secret, 's', '\\u0073') }))}`,
      { 'content-type': 'application/x-www-form-urlencoded' },
    ],
    ['YAML \\x73', `note: "${spell(secret, 's', '\\x73')}"\n`, { 'content-type': 'application/yaml' }],
  ])('%s in a body: 400, the origin never asked', async (_n, body, headers) => {
    const before = rec.seen.length;
    await refusedUnseen(await post(body, headers), before);
  });

  it.each([
    ['gzip', (b: Buffer) => gzipSync(b), 'gzip'],
    ['deflate', (b: Buffer) => deflateSync(b), 'deflate'],
    ['br', (b: Buffer) => brotliCompressSync(b), 'br'],
    ['gzip then br (nested)', (b: Buffer) => brotliCompressSync(gzipSync(b)), 'gzip, br'],
  ])('a key inside a %s body: 400, the origin never asked', async (_n, encode, ce) => {
    const before = rec.seen.length;
    const body = encode(Buffer.from(JSON.stringify({ note: secret })));
    await refusedUnseen(await post(body, { ...json, 'content-encoding': ce }), before);
  });

  it.each([
    ['UTF-16LE without a BOM, untyped', utf16le(`{"note":"${secret}"}`), {}],
    [
      'UTF-16LE without a BOM, typed octet-stream',
      utf16le(`note=${secret}`),
      { 'content-type': 'application/octet-stream' },
    ],
    [
      'UTF-16BE declared',
      utf16le(`{"note":"${secret}"}`).swap16(),
      { 'content-type': 'application/json; charset=utf-16be' },
    ],
    ['UTF-32BE without a BOM', utf32be(`{"note":"${secret}"}`), json],
    ['UTF-16LE percent-encoded', utf16le(`a=${spell(secret, 's', '%73')}`), {}],
    [
      'UTF-16LE in the middle of binary bytes',
      Buffer.concat([Buffer.from([0x89, 0x50, 0, 0, 7, 0xff]), utf16le(secret), Buffer.alloc(9)]),
      { 'content-type': 'image/png' },
    ],
  ])('a key in %s: 400, the origin never asked', async (_n, body, headers) => {
    const before = rec.seen.length;
    await refusedUnseen(await post(body, headers as Record<string, string>), before);
  });

  it.each([
    ['%73vc_ in the query', `/open/x?k=${spell(secret, 's', '%73')}`],
    ['sv%63_ in the path', `/open/${spell(secret, 'c', '%63')}/x`],
    ['%2573vc_ (twice encoded) in the query', `/open/x?k=${spell(secret, 's', '%2573')}`],
    ['\\u0073 in the query', `/open/x?k=${spell(secret, 's', '%5Cu0073')}`],
  ])('a key spelled %s is refused (400) and its wake keeps the URL without it', async (_n, url) => {
    const before = rec.seen.length;
    const r = await rawExchange(
      Number(new URL(t.url).port),
      `GET ${url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    expect(statusOf(r.text)).toBe(400);
    expect(rec.seen.length).toBe(before);
    const id = /x-wake-id: (wk_\w+)/.exec(r.text)?.[1] as string;
    await flushed(t.gw);
    const w = await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).text();
    expect(appReadings(Buffer.from(w)).some((s) => s.includes(secret.slice(9, 30)))).toBe(false);
    if (!url.includes('?')) expect(w).toContain('[redacted:gateway-key]');
  });

  it('a key spelled %73vc_ in a header, User-Agent or X-Consumer-Id is not forwarded, nor stored', async () => {
    const before = rec.seen.length;
    const r = await fetch(`${t.url}/open/h`, {
      headers: {
        'x-note': spell(secret, 's', '%73'),
        'user-agent': `app/1 ${spell(secret, 'v', '%76')}`,
        'x-consumer-id': spell(secret, '_', '%5F'),
      },
    });
    expect(r.status).toBe(200);
    await r.text();
    expect(rec.seen.length).toBe(before + 1);
    expect(reveals(rec.seen.at(-1) as Received, secret)).toBe(false);
    await flushed(t.gw);
    const w = await (
      await fetch(`${t.url}/v2/wakes/${r.headers.get('x-wake-id')}`, { headers: bearer(t.admin) })
    ).text();
    expect(appReadings(Buffer.from(w)).some((s) => s.includes(secret.slice(9, 30)))).toBe(false);
  });

  it('a key split across the pieces of a streamed body over 1 MiB: 400, and the origin saw no part of it', async () => {
    const before = rec.seen.length;
    const filler = Buffer.alloc(1536 * 1024, 'a');
    const at = secret.length - 20;
    const pieces = [
      Buffer.from('{"log":"'),
      filler,
      Buffer.from(`","k":"${secret.slice(0, at)}`),
      Buffer.from(`${secret.slice(at)}","more":"`),
      Buffer.alloc(256 * 1024, 'b'),
      Buffer.from('"}'),
    ];
    const r = await sendInPieces(`${t.url}/open/stream`, pieces, json);
    expect(r.status, r.body).toBe(400);
    expect(JSON.parse(r.body).error.param).toBe('body');
    // The origin was asked (the body streamed) and then cut off, with none of the key.
    await expect.poll(() => rec.seen.length).toBe(before + 1);
    const got = rec.seen.at(-1) as Received;
    expect(got.cut).toBe(true);
    expect(got.body.length).toBeGreaterThan(1024 * 1024);
    expect(reveals(got, secret)).toBe(false);
    expect(got.body.includes('svc_live_')).toBe(false);
  });

  it('a key spelled JSON -> percent -> JSON (%\\u0037\\u0033…, the hex digits escaped), buffered or streamed past 1 MiB: 400, never at the origin', async () => {
    const esc = (c: string) => `\\u00${c.charCodeAt(0).toString(16)}`;
    const spelled = [...secret]
      .map((c, i) => (i < 3 ? `%${[...c.charCodeAt(0).toString(16)].map(esc).join('')}` : c))
      .join('');
    for (const filler of [Buffer.alloc(0), Buffer.alloc(1536 * 1024, 'a')]) {
      const before = rec.seen.length;
      const pieces = [Buffer.from('{"log":"'), filler, Buffer.from(`",${JSON.stringify({ k: spelled }).slice(1)}`)];
      const r = await sendInPieces(`${t.url}/open/layered`, pieces, json);
      expect(r.status, r.body).toBe(400);
      expect(JSON.parse(r.body).error.param).toBe('body');
      await flushed(t.gw);
      const got = rec.seen.slice(before);
      expect(got.every((g) => !reveals(g, secret) && !g.body.includes(secret.slice(9)))).toBe(true);
    }
  });

  it('a body of nothing but spellings (1 MiB of %73, then of \\u005c) is read and forwarded whole', async () => {
    for (const unit of ['%73', '\\u005c']) {
      const before = rec.seen.length;
      const body = Buffer.from(unit.repeat(Math.ceil((1 << 20) / unit.length)));
      const r = await sendInPieces(`${t.url}/open/hostile`, [body.subarray(0, 1000), body.subarray(1000)], json);
      expect(r.status, r.body).toBe(200);
      await expect.poll(() => rec.seen.length).toBe(before + 1);
      expect((rec.seen.at(-1) as Received).body.equals(body)).toBe(true);
    }
  });

  it('a key inside a gzip body streamed past 1 MiB: 400, and what the origin got decodes to none of it', async () => {
    const before = rec.seen.length;
    const plain = Buffer.concat([
      Buffer.from('{"log":"'),
      Buffer.from(randomBytes(1200 * 1024).toString('base64')),
      Buffer.from(`","k":"${secret}"}`),
    ]);
    const gz = gzipSync(Buffer.from(plain));
    expect(gz.length).toBeGreaterThan(1024 * 1024);
    const pieces = [gz.subarray(0, 700_000), gz.subarray(700_000, gz.length - 40), gz.subarray(gz.length - 40)];
    const r = await sendInPieces(`${t.url}/open/gz`, pieces, { ...json, 'content-encoding': 'gzip' });
    expect(r.status, r.body).toBe(400);
    await expect.poll(() => rec.seen.length).toBe(before + 1);
    const got = rec.seen.at(-1) as Received;
    expect(got.cut).toBe(true);
    expect(reveals(got, secret)).toBe(false);
  });

  it('property: random spellings, layers, charsets and codings of a key, sent in random pieces: never at the origin', async () => {
    await fc.assert(
      fc.asyncProperty(
        keyBody(secret).chain((b) => cuts(b.body.length).map((at) => ({ b, at }))),
        async ({ b, at }) => {
          const before = rec.seen.length;
          const r = await sendInPieces(`${t.url}/open/fuzz`, split(b.body, at), b.headers);
          expect(r.status, r.body).toBe(400);
          expect(rec.seen.length).toBe(before);
        },
      ),
      { numRuns: 30 },
    );
  });

  it('property: words that are not keys, in the same spellings, reach the origin byte for byte', async () => {
    const notKey = fc
      .string({ unit: fc.constantFrom(...'abcXYZ019'.split('')), maxLength: 31 })
      .map((s) => `svc_live_${s}`);
    await fc.assert(
      fc.asyncProperty(
        notKey.chain((w) => keyBody(w)).chain((b) => cuts(b.body.length).map((at) => ({ b, at }))),
        async ({ b, at }) => {
          const before = rec.seen.length;
          const r = await sendInPieces(`${t.url}/open/fuzz`, split(b.body, at), b.headers);
          expect(r.status, r.body).toBe(200);
          expect((rec.seen[before] as Received).body.equals(b.body)).toBe(true);
        },
      ),
      { numRuns: 30 },
    );
  });

  it('svc_live_paymentsReconciliation and its kin are words, not keys: forwarded everywhere', async () => {
    const words = ['svc_live_paymentsReconciliation', `svc_test_${'a'.repeat(31)}`, `svc_live_${'b'.repeat(129)}`];
    for (const word of words) {
      const before = rec.seen.length;
      const r = await fetch(`${t.url}/open/${word}?q=${word}`, {
        method: 'POST',
        headers: { ...json, 'x-note': word },
        body: JSON.stringify({ note: word }),
      });
      expect(r.status, word).toBe(200);
      await r.text();
      const got = rec.seen[before] as Received;
      expect(got.url).toBe(`/open/${word}?q=${word}`);
      expect(headerOf(got.headers, 'x-note')).toBe(word);
      expect(got.body.toString()).toContain(word);
    }
  });
});
