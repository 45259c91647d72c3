import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2connect, h2request } from '../helpers/h2.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 250);
const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The method a permissive origin executes: Express's method-override with `methods:
 * null`, Flask's HTTPMethodOverrideMiddleware, Google-style APIs, or PHP behind a server
 * that maps `-` and `_` alike (HTTP_X_HTTP_METHOD_OVERRIDE). Any element of any of the
 * three headers, in any spelling, that is not a read is what the most lenient one
 * may run: the first write it finds, else the request line's method.
 */
function executed(method: string, raw: readonly string[]): string {
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase().replaceAll('_', '-');
    if (name !== 'x-http-method-override' && name !== 'x-http-method' && name !== 'x-method-override') continue;
    for (const v of (raw[i + 1] as string).split(',')) {
      const m = v.trim().toUpperCase();
      if (m !== '' && !READS.has(m)) return m;
    }
  }
  return method;
}

/**
 * A key that holds only a route's read scope sends a read (GET, HEAD, OPTIONS) that
 * carries X-HTTP-Method-Override, X-HTTP-Method or X-Method-Override naming a write:
 * the origin runs a DELETE the gateway authorized as a read. Such a request needs the
 * write scope (403 insufficient_scope otherwise); the header is never stripped, and
 * the wake keeps the request line's method.
 */
describe('method override headers and the scope check', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  let reader: string;
  let writer: string;
  let replayer: string;
  /** What reached the origin: the request line's method and the one it executed. */
  const seen: { method: string; executed: string; url: string; raw: string[] }[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      seen.push({
        method: req.method ?? '',
        executed: executed(req.method ?? '', req.rawHeaders),
        url: req.url ?? '',
        raw: req.rawHeaders,
      });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true }));
    });
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [
        {
          name: 'pay',
          prefix: '/pay',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url },
        },
      ],
      rate_limits: { default: { limit: 1_000_000, burst: 1_000_000, window: 'minute' } },
    });
    port = Number(new URL(t.url).port);
    const create = async (label: string, scopes: string[]) =>
      (await t.gw.keys.create({ label, environment: 'production', scopes }, 'production')).secret;
    reader = await create('reader', ['payments:read']);
    writer = await create('writer', ['payments:read', 'payments:write']);
    replayer = await create('replayer', ['payments:read', 'wakes:read', 'wakes:write']);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  /** A raw HTTP/1.1 request with `lines` as header lines as given: status, error, what reached the origin. */
  const send = async (method: string, lines: string[], key = reader, path = '/pay/p_1') => {
    const before = seen.length;
    const head = [`${method} ${path} HTTP/1.1`, 'Host: x', `Authorization: Bearer ${key}`, ...lines];
    const r = await rawExchange(port, `${head.join('\r\n')}\r\nConnection: close\r\n\r\n`, 3000);
    const body = r.text.slice(r.text.indexOf('\r\n\r\n') + 4);
    let error: { type?: string; message?: string; param?: string | null } | null = null;
    try {
      error = JSON.parse(body).error ?? null;
    } catch {}
    return { status: statusOf(r.text), error, got: seen.slice(before), wake: /x-wake-id: (\S+)/i.exec(r.text)?.[1] };
  };

  it('control: the read key reads, and is refused a DELETE', async () => {
    expect((await send('GET', [])).status).toBe(200);
    const del = await send('DELETE', []);
    expect(del.status).toBe(403);
    expect(del.error).toMatchObject({ type: 'insufficient_scope', message: 'this key lacks the scope payments:write' });
    expect(del.got).toEqual([]);
  });

  for (const name of ['X-HTTP-Method-Override', 'X-HTTP-Method', 'X-Method-Override']) {
    it(`a read key's GET with ${name}: DELETE is refused 403 insufficient_scope; the origin never sees it`, async () => {
      const r = await send('GET', [`${name}: DELETE`]);
      expect(r.got).toEqual([]);
      expect(r.status).toBe(403);
      // The normal refusal: the error body of any key that lacks the write scope.
      expect(r.error).toMatchObject({
        type: 'insufficient_scope',
        message: 'this key lacks the scope payments:write',
        param: null,
      });
    });
  }

  it('refuses every spelling: case, underscores, several lines, comma lists, whitespace; HEAD and OPTIONS too', async () => {
    const attacks: [string, string[]][] = [
      ['GET', ['x-http-method-override: delete']],
      ['GET', ['X-HTTP-METHOD-OVERRIDE: Delete']],
      ['GET', ['X_HTTP_METHOD_OVERRIDE: DELETE']],
      ['GET', ['x-http_method-override: PUT']],
      ['GET', ['X-HTTP-Method-Override: GET', 'X-HTTP-Method-Override: DELETE']],
      ['GET', ['X-HTTP-Method-Override: GET', 'X-Method-Override: PATCH']],
      ['GET', ['X-HTTP-Method-Override: GET, DELETE']],
      ['GET', ['X-HTTP-Method-Override: DELETE, GET']],
      ['GET', ['X-HTTP-Method-Override:\t DELETE \t']],
      ['GET', ['X-HTTP-Method-Override: ,, POST ,']],
      ['GET', ['X-HTTP-Method-Override: GETX']],
      ['GET', ['X-HTTP-Method: MERGE']],
      ['HEAD', ['X-HTTP-Method-Override: POST']],
      ['OPTIONS', ['X-Method-Override: DELETE']],
    ];
    for (const [method, lines] of attacks) {
      const r = await send(method, lines);
      const what = `${method} ${lines.join(' | ')}`;
      expect(r.got, what).toEqual([]);
      expect(r.status, what).toBe(403);
      if (method !== 'HEAD') expect(r.error, what).toMatchObject({ type: 'insufficient_scope' });
    }
  });

  it('a read override stays a read: passed on unchanged, as are empty values', async () => {
    const reads: [string, string[]][] = [
      ['GET', ['X-HTTP-Method-Override: GET']],
      ['GET', ['x-http-method-override: head']],
      ['GET', ['X-Method-Override:  Options ']],
      ['GET', ['X-HTTP-Method: GET, HEAD', 'X-HTTP-Method: options']],
      ['GET', ['X-HTTP-Method-Override:']],
      ['GET', ['X-HTTP-Method-Override: , ,']],
      ['HEAD', ['X-HTTP-Method-Override: GET']],
    ];
    for (const [method, lines] of reads) {
      const r = await send(method, lines);
      const what = `${method} ${lines.join(' | ')}`;
      expect(r.status, what).toBe(200);
      expect(r.got.length, what).toBe(1);
      const sent = lines.map((l) => l.slice(0, l.indexOf(':')).toLowerCase());
      const got = r.got[0]?.raw.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase()) ?? [];
      for (const n of sent) expect(got, what).toContain(n);
    }
  });

  it('a key with the write scope sends it: the header reaches the origin as sent, the wake keeps GET', async () => {
    const r = await send('GET', ['X-HTTP-Method-Override: DELETE'], writer);
    expect(r.status).toBe(200);
    expect(r.got).toHaveLength(1);
    expect(r.got[0]).toMatchObject({ method: 'GET', executed: 'DELETE' });
    const raw = r.got[0]?.raw ?? [];
    expect(raw[raw.findIndex((n) => n.toLowerCase() === 'x-http-method-override') + 1]).toBe('DELETE');
    await flushed(t.gw);
    const w = await (await fetch(`${t.url}/v2/wakes/${r.wake}`, { headers: bearer(t.admin) })).json();
    expect(w).toMatchObject({ method: 'GET', path: '/pay/p_1', status: 200 });
  });

  it('over HTTP/2 the same: a read key with x-http-method-override: DELETE is refused, GET alone served', async () => {
    const s = await h2connect(t.url);
    try {
      const before = seen.length;
      const bad = await h2request(s, { ':path': '/pay/p_1', ...bearer(reader), 'x-http-method-override': 'DELETE' });
      expect(bad.status).toBe(403);
      expect(JSON.parse(bad.text).error).toMatchObject({ type: 'insufficient_scope' });
      const list = await h2request(s, {
        ':path': '/pay/p_1',
        ...bearer(reader),
        'x-method-override': ['GET', 'delete'],
      });
      expect(list.status).toBe(403);
      expect(seen.length).toBe(before);
      const ok = await h2request(s, { ':path': '/pay/p_1', ...bearer(reader), 'x-http-method-override': 'GET' });
      expect(ok.status).toBe(200);
      const ow = await h2request(s, { ':path': '/pay/p_1', ...bearer(writer), 'x-http-method-override': 'DELETE' });
      expect(ow.status).toBe(200);
      expect(seen.slice(before).map((x) => x.executed)).toEqual(['GET', 'DELETE']);
    } finally {
      s.close();
    }
  });

  it('a replay of such a wake is an unsafe write: allow_unsafe, and the write scope of its caller', async () => {
    const r = await send('GET', ['X-HTTP-Method-Override: DELETE'], writer);
    expect(r.status).toBe(200);
    await flushed(t.gw);
    const replay = (key: string, body: unknown) =>
      fetch(`${t.url}/v2/wakes/${r.wake}/replay`, {
        method: 'POST',
        headers: { ...bearer(key), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const before = seen.length;
    const unsafe = await replay(replayer, {});
    expect(unsafe.status).toBe(422);
    expect((await unsafe.json()).error).toMatchObject({ type: 'unprocessable', param: 'allow_unsafe' });
    const scope = await replay(replayer, { allow_unsafe: true });
    expect(scope.status).toBe(403);
    expect((await scope.json()).error).toMatchObject({ type: 'insufficient_scope' });
    await new Promise((res) => setTimeout(res, 100));
    expect(seen.length).toBe(before);
    // The admin key holds every route scope: it may replay it, header and all.
    const ok = await replay(t.admin, { allow_unsafe: true });
    expect(ok.status).toBe(202);
    const until = Date.now() + 5000;
    while (seen.length === before && Date.now() < until) await new Promise((res) => setTimeout(res, 20));
    expect(seen.slice(before).map((x) => [x.method, x.executed])).toEqual([['GET', 'DELETE']]);
  });

  it('property: a read key never gets a write executed at the origin, whatever the spelling', async () => {
    const name = fc
      .tuple(
        fc.constantFrom('x-http-method-override', 'x-http-method', 'x-method-override'),
        fc.infiniteStream(fc.boolean()),
        fc.infiniteStream(fc.boolean()),
      )
      .map(([n, upper, underscore]) => {
        const u = upper[Symbol.iterator]();
        const s = underscore[Symbol.iterator]();
        return [...n]
          .map((c) => (c === '-' ? (s.next().value ? '_' : '-') : u.next().value ? c.toUpperCase() : c))
          .join('');
      });
    const token = fc
      .tuple(
        fc.constantFrom('GET', 'HEAD', 'OPTIONS', 'DELETE', 'POST', 'PUT', 'PATCH', '', 'GETS', 'G ET'),
        fc.boolean(),
      )
      .map(([m, lower]) => (lower ? m.toLowerCase() : m));
    const ows = fc.constantFrom('', ' ', '\t', '  ', ' \t');
    const value = fc
      .array(fc.tuple(ows, token, ows), { minLength: 1, maxLength: 3 })
      .map((parts) => parts.map(([a, m, b]) => `${a}${m}${b}`).join(','));
    const line = fc.tuple(name, value).map(([n, v]) => `${n}:${v}`);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'HEAD', 'OPTIONS'),
        fc.array(line, { minLength: 1, maxLength: 3 }),
        async (method, lines) => {
          const r = await send(method, lines);
          const what = `${method} ${JSON.stringify(lines)}`;
          for (const g of r.got) expect(READS.has(g.executed), `${what} ran ${g.executed} at the origin`).toBe(true);
          const raw = lines.flatMap((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]);
          const writes = !READS.has(executed(method, raw));
          expect(r.status, what).toBe(writes ? 403 : 200);
          expect(r.got.length, what).toBe(writes ? 0 : 1);
        },
      ),
      { numRuns: Math.min(RUNS, 200) },
    );
  }, 120_000);
});
