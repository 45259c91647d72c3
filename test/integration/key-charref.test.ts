import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { appReadings, type Received, sendInPieces } from '../helpers/app-decode.js';
import { call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { cuts, keyBody, split, undoCharRefs } from '../helpers/key-spellings.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Through the real listener and storage: a gateway key spelled with XML/HTML character
 * references (`&#115;`, `&#x73;`, `&amp;#115;`…), which an origin's XML or HTML parser
 * reads as the key, never reaches the origin and is never stored.
 */
describe('gateway keys in XML/HTML character references', () => {
  let origin: TestServer;
  let t: TestGateway;
  const seen: Received[] = [];
  const secret = `svc_live_${newSecret()}`;
  const piece = secret.slice(9, 30);
  const dec = (c: string) => c.charCodeAt(0);
  const hex = (c: string) => c.charCodeAt(0).toString(16);
  const every = (f: (c: string, i: number) => string, k = secret) => [...k].map(f).join('');
  /** What an origin answers, by path: a page or document holding the key in references. */
  const answers: Record<string, [string, string]> = {
    '/open/answer/html': [
      'text/html; charset=utf-8',
      `<html><body><p>Your key: <code>${every((c) => `&#${dec(c)};`)}</code></p><p>kept &amp; &#233;</p></body></html>`,
    ],
    '/keep/answer/xml': [
      'application/xml',
      `<?xml version="1.0"?><account><key>${every((c, i) => (i % 2 ? `&#x${hex(c)};` : c))}</key><name>kept</name></account>`,
    ],
  };

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      let done = false;
      const record = (cut: boolean) => {
        if (done) return;
        done = true;
        seen.push({ url: req.url ?? '', headers: req.rawHeaders, body: Buffer.concat(chunks), cut });
      };
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        record(false);
        const a = answers[req.url ?? ''];
        if (a === undefined) return void res.end('ok');
        res.writeHead(200, { 'content-type': a[0] });
        res.end(a[1]);
      });
      req.on('close', () => record(!req.complete));
    });
    t = await startGateway({
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        // XML bodies kept (not only their size and hash): what is kept has the key replaced.
        {
          name: 'keep',
          prefix: '/keep',
          auth: 'none',
          origins: { production: origin.url },
          capture: { detail: { opaque_bodies: 'keep' } },
        },
      ],
      capture: { detail: { max_per_second: 0 } },
    });
  }, 60_000);
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  /** Whether text, read as an application could (references, percent-encodings and escapes undone), shows the key. */
  const reveals = (text: string | Buffer) => {
    const b = Buffer.isBuffer(text) ? text : Buffer.from(text);
    return appReadings(b).some(
      (x) =>
        x.includes(piece) ||
        undoCharRefs(x).includes(piece) ||
        appReadings(Buffer.from(undoCharRefs(x), 'latin1')).some((y) => y.includes(piece)),
    );
  };
  const wake = async (id: string) => {
    await flushed(t.gw);
    const w = await call(t.url, t.admin, 'GET', `/v2/wakes/${id}`);
    expect(w.status).toBe(200);
    return w.body;
  };
  const refused = async (r: Response, before: number) => {
    const e = (await r.json()) as { error: { type: string; param: string; message: string } };
    expect(r.status, JSON.stringify(e)).toBe(400);
    expect(e.error.type).toBe('invalid_request');
    expect(e.error.param).toBe('body');
    expect(e.error.message).toContain('gateway key was sent in the request body');
    expect(seen.length).toBe(before);
    const w = await wake(r.headers.get('x-wake-id') as string);
    expect(reveals(JSON.stringify(w))).toBe(false);
  };

  const soap = (s: string) =>
    `<?xml version="1.0"?><soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><Login><apiKey>${s}</apiKey></Login></soap:Body></soap:Envelope>`;
  it.each([
    ['XML, the first letter decimal', `<key>${secret.replace('s', '&#115;')}</key>`, 'application/xml'],
    ['XML, the first letter hex (&#x73;)', `<key>${secret.replace('s', '&#x73;')}</key>`, 'text/xml'],
    [
      'XML, leading zeros (&#0115;, &#X0073;)',
      `<key>${secret.replace('s', '&#0115;').replace('v', '&#X0076;')}</key>`,
      'application/xml',
    ],
    ['SOAP, every character decimal', soap(every((c) => `&#${dec(c)};`)), 'application/soap+xml'],
    ['SOAP, every character hex', soap(every((c) => `&#x${hex(c)};`)), 'text/xml; charset=utf-8'],
    [
      'XML, references mixed with plain characters',
      `<k>${every((c, i) => (i % 3 ? c : `&#${dec(c)};`))}</k>`,
      'application/xml',
    ],
    [
      'XHTML form, no semicolons (but before a digit)',
      `<form><input name="k" value="${every((c, i) => (i % 2 ? c : `&#${dec(c)}${/[0-9]/.test(secret.charAt(i + 1)) ? ';' : ''}`))}"/></form>`,
      'application/xhtml+xml',
    ],
    ['HTML, untyped', `<p>${secret.replace('c', '&#99;')}</p>`, ''],
    [
      'escaped XML (&amp;#115;)',
      `<k>${secret.replace('s', '&amp;#115;').replace('_', '&amp;#x5f;')}</k>`,
      'application/xml',
    ],
    ['XML in a JSON string', JSON.stringify({ xml: `<k>${every((c) => `&#x${hex(c)};`)}</k>` }), 'application/json'],
    [
      'XML in a form value (percent over references)',
      `a=1&xml=${encodeURIComponent(`<k>${secret.replace('s', '&#115;')}</k>`)}`,
      'application/x-www-form-urlencoded',
    ],
    [
      'a reference of % and of \\ (&#37;73, &#92;u0076)',
      `<k>${secret.replace('s', '&#37;73').replace('v', '&#92;u0076')}</k>`,
      'application/xml',
    ],
    [
      'a JSON-escaped & (\\u0026#115;)',
      JSON.stringify({ k: 'x' }).replace('x', secret.replace('s', '\\u0026#115;')),
      'application/json',
    ],
    // A key as sent (or as XML reads it), then base62 spelled: a longer run only once those are decoded.
    ['a key, then references of base62 (KEY&#65;…)', `<k>${secret}${'&#65;'.repeat(100)}</k>`, 'application/xml'],
    [
      'a key in references, then percent-encoded base62 (an XML reader reads the key)',
      `<k>${every((c) => `&#${dec(c)};`)}${'%41'.repeat(100)}</k>`,
      'application/xml',
    ],
  ])('%s: 400 before the origin is asked, and its wake keeps none of it', async (_n, body, ct) => {
    const before = seen.length;
    const r = await fetch(`${t.url}/open/in`, {
      method: 'POST',
      headers: ct ? { 'content-type': ct } : {},
      body,
    });
    await refused(r, before);
  });

  it('a key in references streamed past 1 MiB in pieces: 400, and the origin got none of it', async () => {
    const before = seen.length;
    const spelled = every((c) => `&#x${hex(c)};`);
    const at = spelled.length - 40;
    const pieces = [
      Buffer.from('<?xml version="1.0"?><log><line>'),
      Buffer.alloc(1536 * 1024, 'a'),
      Buffer.from(`</line><key>${spelled.slice(0, at)}`),
      Buffer.from(`${spelled.slice(at)}</key><more>`),
      Buffer.alloc(256 * 1024, 'b'),
      Buffer.from('</more></log>'),
    ];
    const r = await sendInPieces(`${t.url}/open/stream`, pieces, { 'content-type': 'application/xml' });
    expect(r.status, r.body).toBe(400);
    expect(JSON.parse(r.body).error.param).toBe('body');
    await expect.poll(() => seen.length).toBe(before + 1);
    const got = seen.at(-1) as Received;
    expect(got.cut).toBe(true);
    expect(got.body.length).toBeGreaterThan(1024 * 1024);
    expect(reveals(got.body)).toBe(false);
  });

  it('a key spelled longer than the scan reads at once (references padded with zeros), streamed: 400, never at the origin', async () => {
    const before = seen.length;
    const spelled = every((c) => `&#${'0'.repeat(500)}${dec(c)};`);
    const body = Buffer.from(`<?xml version="1.0"?><log>${'x'.repeat(300_000)}</log><key>${spelled}</key>`);
    const r = await sendInPieces(`${t.url}/open/padded`, split(body, [200_000, 300_010, 310_000, 320_000]), {
      'content-type': 'application/xml',
    });
    expect(r.status, r.body).toBe(400);
    await flushed(t.gw);
    expect(seen.slice(before).every((g) => !reveals(g.body))).toBe(true);
  });

  it('words that are not keys, in references, reach the origin byte for byte', async () => {
    const words = [
      `svc_live_${'a'.repeat(31)}`.replace('s', '&#115;'),
      `svc_live_${'b'.repeat(20)}&#x62;${'b'.repeat(108)}`,
      secret.replace('s', '&#1151'),
      secret.replace('s', '&#371;'),
      // A run longer than a key in every reading: every character a reference.
      every((c) => `&#${dec(c)};`, `${secret}${'Q'.repeat(100)}`),
      '<p>AT&amp;T &#169; caf&#233; a=1&b=2</p>',
    ];
    for (const w of words) {
      const before = seen.length;
      const body = `<?xml version="1.0"?><note>${w}</note>`;
      const r = await fetch(`${t.url}/open/word`, {
        method: 'POST',
        headers: { 'content-type': 'application/xml' },
        body,
      });
      expect(r.status, w).toBe(200);
      await r.text();
      expect((seen[before] as Received).body.toString(), w).toBe(body);
    }
  });

  it.each([
    ['an HTML page (kept as text)', '/open/answer/html', /<p>kept &amp; &#233;<\/p>/],
    ['an XML document (opaque_bodies: keep)', '/keep/answer/xml', /<name>kept<\/name>/],
  ])('the key in references in %s from the origin is stored replaced, the rest kept', async (_n, path, rest) => {
    const r = await fetch(`${t.url}${path}`);
    expect(r.status).toBe(200);
    await r.text();
    const w = await wake(r.headers.get('x-wake-id') as string);
    const res = w.response as { body: string | null; body_encoding: string };
    expect(res.body_encoding).toBe('utf8');
    const stored = res.body as string;
    expect(reveals(stored)).toBe(false);
    expect(stored).toMatch(/\[redacted:[0-9a-f]{12}\]/);
    expect(stored).toMatch(rest);
    expect(reveals(JSON.stringify(w))).toBe(false);
  });

  it('property: random spellings (references among them), layers, charsets and codings, in random pieces: never at the origin', async () => {
    await fc.assert(
      fc.asyncProperty(
        keyBody(secret).chain((b) => cuts(b.body.length).map((at) => ({ b, at }))),
        async ({ b, at }) => {
          const before = seen.length;
          const r = await sendInPieces(`${t.url}/open/fuzz`, split(b.body, at), b.headers);
          expect(r.status, r.body).toBe(400);
          expect(seen.length).toBe(before);
        },
      ),
      { numRuns: 30, seed: 20261127 },
    );
  });
});
