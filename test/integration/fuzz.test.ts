import { createHash, randomBytes } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync, deflateSync, gunzipSync, gzipSync, inflateSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { holdsGatewayKey } from '../../src/capture/text.js';
import { ERROR_TYPES } from '../../src/errors.js';
import { queryRows } from '../../src/store/store.js';
import { headerOf } from '../helpers/app-decode.js';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { spelledWord } from '../helpers/key-spellings.js';
import { echoOrigin, startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 250);

describe('fuzzing', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await echoOrigin();
    t = await startGateway({
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        // Bodies the redactor cannot read wholly (a binary file part) kept all the same: what it can read is redacted.
        {
          name: 'keep',
          prefix: '/keep',
          auth: 'none',
          origins: { production: origin.url },
          capture: { detail: { opaque_bodies: 'keep' } },
        },
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
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  /** The stored detail of every request to a path, once everything served is stored. */
  const storedDetail = async <T>(path: string, columns: string): Promise<T[]> => {
    await flushed(t.gw);
    return queryRows<T>(
      t.gw.store,
      `SELECT ${columns} FROM ${t.gw.store.db}.wake_details
        WHERE id IN (SELECT id FROM ${t.gw.store.db}.wakes WHERE path = {path:String})`,
      { path },
    );
  };

  const expectErrorBody = (status: number, text: string, what: string) => {
    expect(status, what).toBeLessThan(500);
    if (status >= 400) {
      const b = JSON.parse(text);
      expect(Object.keys(ERROR_TYPES), what).toContain(b.error.type);
      expect(typeof b.error.message, what).toBe('string');
      expect('param' in b.error && 'retry_after' in b.error && 'wake_id' in b.error, what).toBe(true);
    }
  };

  it('every /v2 endpoint answers 2xx or 4xx with the error body, whatever the parameters, bodies and headers', async () => {
    const ids = fc.oneof(
      fc.constantFrom('wk_000000000AAAAAAAAAAAAAA', 'key_x', 'dlv_', '%00', '..', 'we_abc'),
      fc.string({ maxLength: 30 }),
    );
    const path = fc.oneof(
      fc.constant('/v2/wakes'),
      ids.map((i) => `/v2/wakes/${encodeURIComponent(i)}`),
      fc.constant('/v2/api-keys'),
      ids.map((i) => `/v2/api-keys/${encodeURIComponent(i)}`),
      fc.constant('/v2/webhooks/endpoints'),
      fc.constant('/v2/webhooks/deliveries'),
      ids.map((i) => `/v2/webhooks/deliveries/${encodeURIComponent(i)}/replay`),
      fc.constant('/v2/openapi.json'),
    );
    const paramName = fc.constantFrom(
      'limit',
      'cursor',
      'status',
      'status_class',
      'path',
      'consumer',
      'key_id',
      'min_latency_ms',
      'environment',
      'endpoint_id',
      'event_type',
      'bogus',
    );
    const query = fc.array(
      fc.tuple(
        paramName,
        fc.oneof(
          fc.string({ maxLength: 20 }),
          fc.integer().map(String),
          fc.constantFrom('2xx', '5xx', '{id}', '/a/*', 'cur_abc', '-1', '1e3', ''),
        ),
      ),
      { maxLength: 4 },
    );
    const url = fc.oneof(
      fc.constantFrom(
        'https://127.0.0.1/x',
        'http://10.0.0.1/',
        'https://[::1]/',
        'ftp://x/',
        'notaurl',
        '',
        'https://user:pw@127.0.0.1/',
      ),
      fc.string({ maxLength: 40 }),
    );
    const jsonValue = fc.oneof(
      fc.string({ maxLength: 20 }),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.array(fc.string({ maxLength: 10 }), { maxLength: 4 }),
    );
    const body = fc.oneof(
      fc.constant(undefined),
      fc
        .record(
          {
            label: jsonValue,
            environment: fc.oneof(fc.constantFrom('production', 'sandbox', 'nowhere'), jsonValue),
            scopes: fc.oneof(
              fc.array(fc.constantFrom('wakes:read', 'keys:write', 'payments:read', '*', 'x'), { maxLength: 4 }),
              jsonValue,
            ),
            url,
            events: fc.oneof(fc.array(fc.constantFrom('wake.error', '*', 'nope'), { maxLength: 3 }), jsonValue),
            revoke_at: fc.oneof(fc.constantFrom('2099-01-01T00:00:00.000Z', '2000-01-01T00:00:00Z', 'soon'), jsonValue),
            rate_limit: fc.oneof(
              fc.record({ limit: fc.integer(), burst: fc.integer(), window: fc.constantFrom('minute', 'year') }),
              jsonValue,
            ),
            extra: jsonValue,
          },
          { requiredKeys: [] },
        )
        .map((o) => JSON.stringify(o)),
      fc.string({ maxLength: 60 }),
      fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a).toString('latin1')),
    );
    const auth = fc.oneof(
      fc.constant(`Bearer ${t.admin}`),
      fc.constant(undefined),
      fc.string({ maxLength: 40 }).map((s) => `Bearer ${s.replace(/[^\x20-\x7e]/g, '')}`),
      fc.constantFrom('Basic abc', 'Bearer', 'bearer  x'),
    );
    const ctype = fc.constantFrom('application/json', 'text/plain', 'application/json; charset=utf-8', undefined);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST', 'DELETE', 'PUT', 'PATCH', 'HEAD'),
        path,
        query,
        body,
        auth,
        ctype,
        async (method, p, q, b, a, ct) => {
          const qs = q.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
          const headers: Record<string, string> = {};
          if (a !== undefined) headers.authorization = a;
          if (ct !== undefined && b !== undefined) headers['content-type'] = ct;
          const hasBody = b !== undefined && method !== 'GET' && method !== 'HEAD';
          const res = await fetch(`${t.url}${p}${qs ? `?${qs}` : ''}`, {
            method,
            headers,
            body: hasBody ? b : undefined,
            signal: AbortSignal.timeout(5000),
          });
          const text = await res.text();
          if (method !== 'HEAD') expectErrorBody(res.status, text, `${method} ${p}?${qs} ${b ?? ''}`);
          else expect(res.status).toBeLessThan(500);
          expect(res.headers.get('x-wake-id')).toMatch(/^wk_/);
        },
      ),
      { numRuns: RUNS },
    );
  }, 120_000);

  it('a named JSON field or a gateway key is never stored, however escaped or spaced, whatever the content type, compressed, whole or cut short', async () => {
    // Each character of the key as it is, or as a \uXXXX escape in either case.
    const spelled = fc.constantFrom('password', 'card_number', 'token', 'api_key').chain((name) =>
      fc
        .array(fc.constantFrom('as is', 'lower', 'upper'), { minLength: name.length, maxLength: name.length })
        .map((how) =>
          [...name]
            .map((c, i) => {
              if (how[i] === 'as is') return c;
              const hex = c.charCodeAt(0).toString(16).padStart(4, '0');
              return `\\u${how[i] === 'upper' ? hex.toUpperCase() : hex}`;
            })
            .join(''),
        ),
    );
    const codings: Record<string, (b: Buffer) => Buffer> = {
      identity: (b) => b,
      gzip: (b) => gzipSync(b),
      deflate: (b) => deflateSync(b),
      br: (b) => brotliCompressSync(b),
    };
    let n = 0;
    const secrets: string[] = [];
    // A gateway key's characters (svc_live_ and 32 more), each as it is or escaped.
    const keySpelling = fc.array(fc.constantFrom('as is', 'lower', 'upper'), { minLength: 41, maxLength: 41 });
    const spell = (text: string, how: readonly string[]) =>
      [...text]
        .map((c, i) => {
          if (how[i] === 'as is') return c;
          const hex = c.charCodeAt(0).toString(16).padStart(4, '0');
          return `\\u${how[i] === 'upper' ? hex.toUpperCase() : hex}`;
        })
        .join('');
    await fc.assert(
      fc.asyncProperty(
        spelled,
        fc.constantFrom('', ' ', '\n', ' \t'),
        fc.boolean(),
        fc.boolean(),
        fc.constantFrom(...Object.keys(codings)),
        // JSON is sent as text/plain (sendBeacon), untyped, or inside a page, as well as JSON.
        fc.constantFrom('application/json', 'text/plain;charset=UTF-8', undefined, 'text/html'),
        keySpelling,
        async (key, ws, number, cut, coding, type, how) => {
          n++;
          const secret = number ? `${90_000_000 + n}` : `"s3cr3t-${n}-fz"`;
          secrets.push(secret.replaceAll('"', ''));
          const gatewayKey = `svc_live_${createHash('sha256').update(`fz-key-${n}`).digest('hex').slice(0, 32)}`;
          secrets.push(gatewayKey.slice(9));
          // Past max_body_bytes (32 KiB) the detail keeps the body cut short, secrets included.
          const pad = cut ? randomBytes(45_000).toString('base64') : 'y';
          const body = Buffer.from(
            `{"note":"${spell(gatewayKey, how)}","user":{"name":"ann","${key}"${ws}:${ws}${secret}},"pad":"${pad}"}`,
          );
          const r = await fetch(`${t.url}/open/fz`, {
            method: 'POST',
            headers: { ...(type ? { 'content-type': type } : {}), 'content-encoding': coding },
            body: (codings[coding] as (b: Buffer) => Buffer)(body),
          });
          // A gateway key in a body, in any spelling and coding, is refused (issue #34, item 10); its wake is kept.
          expect(r.status).toBe(400);
          await r.arrayBuffer();
        },
      ),
      { numRuns: Math.min(RUNS, 60) },
    );
    const rows = await storedDetail<{ b: string; enc: string; state: number }>(
      '/open/fz',
      'request_body AS b, request_body_encoding AS enc, request_body_state AS state',
    );
    expect(rows.length).toBe(n);
    expect(rows.some((x) => Number(x.state) === 1)).toBe(true);
    for (const x of rows) {
      const raw = Buffer.from(x.b, x.enc === 'base64' ? 'base64' : 'utf8');
      // What any reader could make of the stored bytes: as they are, or decompressed.
      let text = raw.toString('latin1');
      for (const decode of [gunzipSync, inflateSync, brotliDecompressSync])
        try {
          text += decode(raw).toString('latin1');
        } catch {
          // Not this coding.
        }
      // ... and with JSON's escapes undone.
      text += text.replace(/\\u([0-9a-fA-F]{4})/g, (_m, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
      for (const secret of secrets) expect(text).not.toContain(secret);
      // Kept and redacted, or (compressed and cut short, so unreadable) kept only as size and hash.
      if (x.enc === 'omitted') expect(Number(x.state)).toBe(1);
      else expect(text).toMatch(/\[redacted:[0-9a-f]{12}\]/);
    }
  });

  it('a named form or query field is never stored, however its name is nested or percent-encoded', async () => {
    // The name nested as Rails and PHP write it, each character as is or percent-encoded.
    const encodeSome = (text: string, how: boolean[]) =>
      [...text]
        .map((c, i) => (how[i % how.length] ? `%${c.charCodeAt(0).toString(16).padStart(2, '0').toUpperCase()}` : c))
        .join('');
    const param = fc
      .tuple(
        fc.constantFrom('password', 'card_number', 'token', 'api_key'),
        fc.constantFrom('{}', 'user[{}]', 'a[b][{}]', '{}[]', 'x[{}][0]'),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 12 }),
      )
      .map(([name, shape, how]) => encodeSome(shape.replace('{}', name), how));
    let n = 0;
    const secrets: string[] = [];
    await fc.assert(
      fc.asyncProperty(param, fc.boolean(), async (name, inQuery) => {
        n++;
        const secret = `f0rm-s3cr3t-${n}-x`;
        secrets.push(secret);
        const pair = `a=1&${name}=${secret}&z=2`;
        const r = await fetch(`${t.url}/open/ff${inQuery ? `?${pair}` : ''}`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: inQuery ? 'a=1' : pair,
        });
        expect(r.status).toBe(200);
        await r.arrayBuffer();
      }),
      { numRuns: Math.min(RUNS, 60) },
    );
    const rows = await storedDetail<{ q: string; b: string }>('/open/ff', 'query AS q, request_body AS b');
    expect(rows.length).toBe(n);
    const stored = rows.map((x) => `${x.q}\n${x.b}`).join('\n');
    for (const secret of secrets) expect(stored).not.toContain(secret);
    for (const x of rows) expect(`${x.q}${x.b}`).toMatch(/%5Bredacted%3A[0-9a-f]{12}%5D/);
  });

  it('a named multipart field is never stored, whatever its quoting, casing, nesting or neighbouring file parts', async () => {
    let n = 0;
    const secrets: string[] = [];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('password', 'card_number', 'token', 'api_key'),
        fc.constantFrom('{}', 'user[{}]', 'a[b][{}]', '{}[]'),
        fc.constantFrom('name="{}"', 'name={}', 'NAME = "{}"'),
        fc.constantFrom('Content-Disposition', 'content-disposition', 'CONTENT-DISPOSITION'),
        fc.uint8Array({ maxLength: 64 }),
        fc.boolean(),
        async (field, shape, quoting, header, bytes, cut) => {
          n++;
          const secret = `mp-s3cr3t-${n}-x`;
          secrets.push(secret);
          const name = shape.replace('{}', field);
          const boundary = `b0und-${n}`;
          const part = (head: string, body: Buffer | string) =>
            Buffer.concat([Buffer.from(`--${boundary}\r\n${head}\r\n\r\n`), Buffer.from(body), Buffer.from('\r\n')]);
          const body = Buffer.concat([
            part(`${header}: form-data; name="file"; filename="f.bin"`, Buffer.from(bytes)),
            part(`${header}: form-data; ${quoting.replace('{}', name)}`, secret),
            // Past max_body_bytes (32 KiB) the detail keeps the body cut short, after the secret.
            part(`${header}: form-data; name="pad"`, cut ? 'p'.repeat(40_000) : 'p'),
            Buffer.from(`--${boundary}--\r\n`),
          ]);
          const r = await fetch(`${t.url}/keep/mp`, {
            method: 'POST',
            headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
            body,
          });
          expect(r.status).toBe(200);
          await r.arrayBuffer();
        },
      ),
      { numRuns: Math.min(RUNS, 60) },
    );
    const rows = await storedDetail<{ b: string; enc: string }>(
      '/keep/mp',
      'request_body AS b, request_body_encoding AS enc',
    );
    expect(rows.length).toBe(n);
    for (const x of rows) {
      const text = Buffer.from(x.b, x.enc === 'base64' ? 'base64' : 'utf8').toString('latin1');
      for (const secret of secrets) expect(text).not.toContain(secret);
      expect(text).toMatch(/\r\n\r\n\[redacted:[0-9a-f]{12}\]\r\n/);
    }
  });

  it('the proxy answers any request line and headers without a 5xx, a hang or a crash', async () => {
    const token = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/);
    const target = fc.oneof(
      fc
        .array(
          fc.constantFrom(
            'open',
            'pay',
            '..',
            '.',
            '%2e%2e',
            '%2F',
            '%00',
            'a b',
            '%',
            '%zz',
            '',
            '//',
            'é',
            '\\',
            '?',
            '#',
            '*',
          ),
          { maxLength: 5 },
        )
        .map((s) => `/${s.join('/')}`),
      fc.constantFrom('*', 'http://evil.example/open/x', '/open/x?y=%', 'open/x', '/open/../pay/x'),
      fc.string({ maxLength: 30 }).map((s) => `/open/${s}`),
    );
    const header = fc.tuple(
      fc.oneof(
        token,
        fc.constantFrom(
          'Host',
          'Content-Length',
          'Transfer-Encoding',
          'Connection',
          'Authorization',
          'Upgrade',
          'Expect',
          'X-Forwarded-For',
        ),
      ),
      fc.oneof(
        fc.string({ maxLength: 30 }),
        fc.constantFrom(
          'chunked',
          '-1',
          '99999999999',
          'close',
          'Bearer x',
          '100-continue',
          'websocket',
          '\u00ff\u00fe',
        ),
      ),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constantFrom('GET', 'POST', 'HEAD', 'OPTIONS', 'DELETE', 'CONNECT', 'TRACE'), token),
        target,
        fc.array(header, { maxLength: 6 }),
        async (method, tgt, hs) => {
          const lines = hs.map(([k, v]) => `${k}: ${v.replace(/[\r\n]/g, '')}`).join('\r\n');
          const raw = `${method} ${tgt} HTTP/1.1\r\nHost: fuzz\r\n${lines}${lines ? '\r\n' : ''}Connection: close\r\n\r\n`;
          const r = await rawExchange(port, Buffer.from(raw, 'latin1'), 5000);
          const status = statusOf(r.text);
          // CONNECT (no forward proxy here) is always answered, never dropped: a 4xx, in the
          // gateway's error body unless Node refused an Expect (417).
          if (method === 'CONNECT') {
            expect(status, raw).toBeGreaterThanOrEqual(400);
            // 501: a transfer coding the gateway does not decode (`x, chunked`), refused before the target.
            if (status === 501) expect(lines, raw).toMatch(/transfer-encoding/i);
            else expect(status, raw).toBeLessThan(500);
            if (status !== 417) expect(r.text, raw).toMatch(/"error":\{"type":"[a-z_]+","message":/);
            return;
          }
          // A request whose body never comes (a stated Content-Length) may be held until the request timeout.
          if (status === 0) {
            expect(r.closed || /content-length|transfer-encoding|expect/i.test(lines), raw).toBe(true);
            return;
          }
          // 501: a body in a transfer coding the gateway does not decode (`gzip, chunked`).
          if (status === 501) expect(lines, raw).toMatch(/transfer-encoding/i);
          else expect(status, raw).toBeLessThan(500);
        },
      ),
      { numRuns: RUNS },
    );
    // Still alive and well.
    const ok = await fetch(`${t.url}/open/after-fuzz`);
    expect(ok.status).toBe(200);
  }, 180_000);
});

describe('fuzzing the edge rules (smuggling, path parameters, spoofed headers)', () => {
  const seen: { url: string; rawHeaders: string[] }[] = [];
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  let key: string;

  beforeAll(async () => {
    // A plain origin with no upgrade handler: it answers upgrade requests with 200 and keeps the connection.
    origin = await startServer((req, res) => {
      seen.push({ url: req.url ?? '', rawHeaders: req.rawHeaders });
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        {
          name: 'pay',
          prefix: '/pay',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url },
        },
      ],
      rate_limits: {
        default: { limit: 1_000_000, burst: 1_000_000, window: 'minute' },
        // Refused keys: a bucket per address that never refills within a run, so each draw shows.
        unauthenticated: { limit: 1, burst: 1_000_000, window: 'day' },
      },
    });
    port = Number(new URL(t.url).port);
    key = (await t.gw.keys.create({ label: 'r', environment: 'production', scopes: ['payments:read'] }, 'production'))
      .secret;
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const pipelined = fc.record({
    method: fc.constantFrom('GET', 'POST', 'DELETE', 'PUT'),
    path: fc.constantFrom('/pay/admin/delete', '/open/x', '/pay/x', '/v2/api-keys'),
    spoof: fc.constantFrom(
      'x-wakegate-key-id: key_forged',
      'x-wakegate-environment: production',
      'x-forwarded-for: 6.6.6.6',
    ),
  });

  it('an upgrade the origin does not accept never lets a pipelined request through', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/open/ws', '/pay/ws'),
        fc.constantFrom('websocket', 'WebSocket'),
        fc.constantFrom('Upgrade', 'upgrade, keep-alive', 'keep-alive, Upgrade, X-A'),
        fc.array(pipelined, { minLength: 1, maxLength: 3 }),
        async (path, proto, connection, extra) => {
          seen.length = 0;
          const more = extra
            .map((e) => `${e.method} ${e.path} HTTP/1.1\r\nHost: x\r\n${e.spoof}\r\nContent-Length: 0\r\n\r\n`)
            .join('');
          const raw =
            `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: ${connection}\r\nUpgrade: ${proto}\r\n` +
            `Authorization: Bearer ${key}\r\n\r\n${more}`;
          const r = await rawExchange(port, raw, 3000);
          expect(r.closed, raw).toBe(true);
          expect(statusOf(r.text), raw).toBe(200);
          // Exactly the one checked request reached the origin.
          expect(
            seen.map((s) => s.url),
            raw,
          ).toEqual([path]);
        },
      ),
      { numRuns: Math.min(RUNS, 60) },
    );
  }, 120_000);

  it('an upgrade to a protocol the route does not list (h2c, any token) never reaches the origin: without a body it is served as plain HTTP/1.1, with one refused', async () => {
    const token = fc.oneof(
      fc.constantFrom('h2c', 'H2C', 'h2', 'foo/1', 'TLS/1.0', 'websocket2', 'IRC/6.9'),
      fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~/-]{1,20}$/).filter((s) => s.toLowerCase() !== 'websocket'),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('/open/ws', '/pay/ws'), token, fc.boolean(), async (path, proto, body) => {
        seen.length = 0;
        const raw =
          `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: ${proto}\r\n` +
          `HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nAuthorization: Bearer ${key}\r\n` +
          (body ? 'Content-Length: 2\r\n\r\nhi' : '\r\n');
        const r = await rawExchange(port, raw, 3000);
        expect(r.closed, raw).toBe(true);
        if (body) {
          expect(statusOf(r.text), raw).toBe(400);
          expect(r.text, raw).toContain('routes[].upgrades');
          expect(seen, raw).toHaveLength(0);
          return;
        }
        expect(statusOf(r.text), raw).toBe(200);
        expect(seen, raw).toHaveLength(1);
        const names = (seen[0]?.rawHeaders ?? []).filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
        expect(names, raw).not.toContain('upgrade');
        expect(names, raw).not.toContain('http2-settings');
      }),
      { numRuns: Math.min(RUNS, 60) },
    );
  });

  it('dot segments hidden behind path parameters or encodings never reach an origin', async () => {
    const dot = fc.constantFrom('..', '.', '%2e%2e', '%2E.', '.%2e', '%2e');
    const param = fc.constantFrom(';', ';x=1', '%3b', '%3Bjsessionid=a', ';/');
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/open', '/pay'),
        dot,
        param,
        fc.constantFrom('/pay/secret', '/x', ''),
        async (prefix, d, p, rest) => {
          seen.length = 0;
          const target = `${prefix}/${d}${p}${rest}`;
          const r = await rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, 3000);
          expect(statusOf(r.text), target).toBe(400);
          expect(seen, target).toHaveLength(0);
        },
      ),
      { numRuns: Math.min(RUNS, 100) },
    );
  }, 120_000);

  it('a gateway key in Host (any spelling, with a port or a subdomain) never reaches an origin, in X-Forwarded-Host either', async () => {
    // A spelling that is no uri-host[:port] (`&#x73;`, `\\u0073`) is refused 400 before the origin (RFC 9112 §3.2);
    // a valid one (plain, percent-encoded) is served, the key left out.
    const uriHostPort = /^(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})+(?::[0-9]*)?$/;
    const host = fc.tuple(
      fc.constantFrom('', 'api.', 'a-'),
      spelledWord(key),
      fc.constantFrom('', ':8080', '.example.com'),
    );
    await fc.assert(
      fc.asyncProperty(host, fc.constantFrom('/open/h', '/pay/h'), async ([before, k, after], path) => {
        seen.length = 0;
        const h = `${before}${k}${after}`;
        const auth = path.startsWith('/pay') ? `Authorization: Bearer ${key}\r\n` : '';
        const r = await rawExchange(
          port,
          `GET ${path} HTTP/1.1\r\nHost: ${h}\r\n${auth}Connection: close\r\n\r\n`,
          3000,
        );
        expect(statusOf(r.text), h).toBe(uriHostPort.test(h) ? 200 : 400);
        const got = (seen[0]?.rawHeaders ?? []).join('\n');
        expect(got, h).not.toContain(h);
        expect(holdsGatewayKey(got), h).toBe(false);
      }),
      { numRuns: Math.min(RUNS, 60) },
    );
  }, 120_000);

  it('an absolute-form target reaches an origin only as a safe path with a valid Host, never its userinfo or a key, whatever its scheme, authority and path', async () => {
    const uriHostPort =
      /^(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})+(?::[0-9]*)?$|^\[[0-9A-Fa-f:.]+\](?::[0-9]*)?$/;
    const scheme = fc.constantFrom('http://', 'https://', 'HTTP://', 'HtTpS://', 'ftp://', 'ws://', 'http:/', 'http:');
    const userinfo = fc.constantFrom('', 'user@', 'u:p@', `${key}@`, '@');
    const authority = fc.oneof(
      fc.constantFrom(
        'api.example',
        'api.example:8443',
        '127.0.0.1',
        '[::1]:80',
        '',
        ':80',
        'a b',
        'x%zz',
        '[::1',
        key,
      ),
      // Not starting with `/`: after the scheme `http:/` that would make another authority
      // (`http:/` + `/&` is `http://&`) than the one the checks below compare with.
      fc
        .string({ maxLength: 12 })
        .map((s) => s.replace(/[\r\n ]/g, ''))
        .filter((s) => !s.startsWith('/')),
    );
    const path = fc.constantFrom(
      '',
      '/',
      '/open/a',
      '/pay/a',
      '/open/../pay/a',
      '/open/%2e%2e/pay',
      `/open/?k=${key}`,
      '?q=1',
      '#f',
      '/open#x',
    );
    await fc.assert(
      fc.asyncProperty(scheme, userinfo, authority, path, async (sc, ui, au, pa) => {
        seen.length = 0;
        const target = `${sc}${ui}${au}${pa}`;
        const auth = pa.startsWith('/pay') ? `Authorization: Bearer ${key}\r\n` : '';
        const r = await rawExchange(
          port,
          Buffer.from(`GET ${target} HTTP/1.1\r\nHost: sent.example\r\n${auth}Connection: close\r\n\r\n`, 'latin1'),
          3000,
        );
        const status = statusOf(r.text);
        expect(status, target).toBeGreaterThanOrEqual(200);
        expect(status, target).toBeLessThan(500);
        const got = seen[0];
        if (got === undefined) return;
        // What reached the origin: an origin-form path, the target's authority as X-Forwarded-Host.
        expect(got.url.startsWith('/'), target).toBe(true);
        expect(got.url, target).not.toMatch(/(^|\/)(\.\.|%2e%2e)(\/|$)/i);
        // A key as the host is served without it (the Host rule); any other host is passed on as sent.
        const xfh = headerOf(got.rawHeaders, 'x-forwarded-host');
        if (!holdsGatewayKey(au)) {
          expect(xfh, target).toBe(au);
          expect(uriHostPort.test(au), target).toBe(true);
        }
        expect(ui, target).toBe('');
        const all = `${got.url}\n${got.rawHeaders.join('\n')}`;
        expect(all, target).not.toContain('sent.example');
        expect(holdsGatewayKey(all), target).toBe(false);
      }),
      { numRuns: Math.min(RUNS, 120) },
    );
  }, 120_000);

  it('a body reaches an origin only when its Transfer-Encoding is chunked alone; any other coding is 501, whatever the spelling', async () => {
    const coding = fc.constantFrom('chunked', 'Chunked', 'gzip', 'deflate', 'br', 'identity', 'x-token', 'compress');
    await fc.assert(
      fc.asyncProperty(fc.array(coding, { minLength: 1, maxLength: 3 }), fc.boolean(), async (codings, lines) => {
        seen.length = 0;
        const te = lines
          ? codings.map((c) => `Transfer-Encoding: ${c}\r\n`).join('')
          : `Transfer-Encoding: ${codings.join(', ')}\r\n`;
        const r = await rawExchange(
          port,
          `POST /open/te HTTP/1.1\r\nHost: x\r\n${te}Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
          3000,
        );
        const status = statusOf(r.text);
        const chunked = codings.map((c) => c.toLowerCase() === 'chunked');
        const alone = codings.length === 1 && chunked[0] === true;
        // chunked alone is forwarded; chunked last after other codings is 501; no chunked last, or
        // chunked before the last, is 400 (the body's length cannot be known, RFC 9112 §6.3).
        const expected = alone ? 200 : chunked.at(-1) === true && !chunked.slice(0, -1).includes(true) ? 501 : 400;
        expect(status, te).toBe(expected);
        expect(seen.length, te).toBe(alone ? 1 : 0);
      }),
      { numRuns: Math.min(RUNS, 80) },
    );
  }, 120_000);

  it("a /v2 call with a refused key is 401 from its connection's bucket, whatever handover or forwarding headers it sends and whatever its body", async () => {
    // No trusted proxy here: X-Forwarded-For is not read, and the handover's own headers
    // (an edge thread's peer, a body it refused) are the edge's to write, never a client's.
    const name = fc
      .constantFrom(
        'x-wakegate-peer',
        'x-wakegate-body-refused',
        'x-wakegate-internal',
        'x-forwarded-for',
        'forwarded',
        'x-real-ip',
      )
      .chain((n) =>
        fc
          .array(fc.constantFrom('as is', 'upper', 'underscore'), { minLength: n.length, maxLength: n.length })
          .map((how) =>
            [...n]
              .map((c, i) => (how[i] === 'upper' ? c.toUpperCase() : how[i] === 'underscore' && c === '-' ? '_' : c))
              .join(''),
          ),
      );
    const value = fc.constantFrom(
      '203.0.113.9',
      '10.0.0.1, 203.0.113.9',
      'for=203.0.113.9',
      '::1',
      'too-large',
      'too-slow',
    );
    const body = fc.constantFrom('none', 'small', 'announced past the limit');
    let last: number | null = null;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(name, value), { minLength: 1, maxLength: 4 }), body, async (headers, b) => {
        const lines = headers.map(([k, v]) => `${k}: ${v}\r\n`).join('');
        const framing =
          b === 'none'
            ? ''
            : b === 'small'
              ? 'Content-Type: application/json\r\nContent-Length: 2\r\n'
              : 'Content-Type: application/json\r\nContent-Length: 5000000\r\n';
        const r = await rawExchange(
          port,
          `POST /v2/api-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer svc_live_${'z'.repeat(43)}\r\n${lines}${framing}Connection: close\r\n\r\n${b === 'none' ? '' : '{}'}`,
          3000,
        );
        expect(statusOf(r.text), `${lines}${b}`).toBe(401);
        const remaining = Number(/\r\nx-ratelimit-remaining: (\d+)/i.exec(r.text)?.[1] ?? Number.NaN);
        // One bucket, the connection's (127.0.0.1): each call takes the next token of it.
        if (last !== null) expect(remaining, `${lines}${b}`).toBe(last - 1);
        last = remaining;
      }),
      { numRuns: Math.min(RUNS, 100) },
    );
  }, 120_000);

  it('client-sent identity and forwarding headers never reach an origin as sent, in any spelling an origin folds to them', async () => {
    // Each name in any case, each `-` possibly a `_`: nginx (underscores_in_headers), CGI/PHP,
    // Django and Rack read `X_Wakegate_Consumer` as x-wakegate-consumer.
    const name = fc
      .constantFrom(
        'x-wakegate-key-id',
        'x-wakegate-consumer',
        'x-wakegate-environment',
        'x-wakegate-replay-of',
        'x-wakegate-anything',
        'x-forwarded-for',
        'x-forwarded-proto',
        'x-forwarded-host',
        'x-forwarded-port',
        'forwarded',
      )
      .chain((n) =>
        fc
          .array(fc.constantFrom('as is', 'upper', 'underscore'), { minLength: n.length, maxLength: n.length })
          .map((how) =>
            [...n]
              .map((c, i) => (how[i] === 'upper' ? c.toUpperCase() : how[i] === 'underscore' && c === '-' ? '_' : c))
              .join(''),
          ),
      );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(name, fc.stringMatching(/^[a-z0-9=;.]{1,20}$/)), { minLength: 1, maxLength: 4 }),
        fc.constantFrom('/open/h', '/pay/h'),
        async (headers, path) => {
          seen.length = 0;
          const lines = headers.map(([k, v]) => `${k}: spoof-${v}`).join('\r\n');
          const auth = path.startsWith('/pay') ? `Authorization: Bearer ${key}\r\n` : '';
          const r = await rawExchange(
            port,
            `GET ${path} HTTP/1.1\r\nHost: x\r\n${auth}${lines}\r\nConnection: close\r\n\r\n`,
            3000,
          );
          expect(statusOf(r.text)).toBe(200);
          const got = seen[0]?.rawHeaders ?? [];
          expect(got.join('\n'), lines).not.toContain('spoof-');
          expect(got.join('\n')).not.toMatch(/svc_(live|test)_/);
        },
      ),
      { numRuns: Math.min(RUNS, 100) },
    );
  }, 120_000);
});
