import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 250);

/** What each route lets an Upgrade switch to (routes[].upgrades, lower-cased); absent: no route. */
const ALLOWED: Record<string, readonly string[]> = {
  '/open': ['websocket'],
  '/pay': ['websocket'],
  '/both': ['websocket', 'h2c'],
  '/nows': [],
};

const values = (raw: readonly string[], name: string): string[] => {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.toLowerCase() === name) out.push(raw[i + 1] as string);
  return out;
};

const tokens = (v: string): string[] =>
  v
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t !== '');

describe('fuzzing upgrade offers', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  let key: string;
  const seen: { via: 'request' | 'upgrade'; url: string; rawHeaders: string[] }[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      seen.push({ via: 'request', url: req.url ?? '', rawHeaders: req.rawHeaders });
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    // An origin that switches to whatever it is offered first (as hypercorn does for h2c), then ends.
    origin.server.on('upgrade', (req, socket) => {
      seen.push({ via: 'upgrade', url: req.url ?? '', rawHeaders: req.rawHeaders });
      socket.on('error', () => {});
      const first = (req.headers.upgrade ?? '').split(',')[0]?.trim();
      socket.end(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${first}\r\n\r\n`);
    });
    const route = (prefix: string, extra: Record<string, unknown> = { auth: 'none' }) => ({
      name: prefix.slice(1),
      prefix,
      upgrades: [...(ALLOWED[prefix] as string[])],
      origins: { production: origin.url },
      ...extra,
    });
    t = await startGateway({
      routes: [
        route('/open'),
        route('/pay', { scopes: { read: 'payments:read', write: 'payments:write' } }),
        route('/both'),
        route('/nows'),
      ],
      rate_limits: {
        default: { limit: 1_000_000, burst: 1_000_000, window: 'minute' },
        unauthenticated: { limit: 1_000_000, burst: 1_000_000, window: 'minute' },
      },
    });
    port = Number(new URL(t.url).port);
    key = (await t.gw.keys.create({ label: 'f', environment: 'production', scopes: ['payments:read'] }, 'production'))
      .secret;
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('bodyless requests with any Upgrade, Connection tokens and HTTP2-Settings: the origin is offered only what the route allows, and every one is answered', async () => {
    const token = fc.oneof(
      fc.constantFrom('h2c', 'H2C', 'websocket', 'WebSocket', 'h2', 'foo/1', 'TLS/1.0', 'IRC/6.9', 'websocket2'),
      fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~/-]{1,12}$/),
    );
    const upgrade = fc
      .tuple(fc.array(token, { minLength: 1, maxLength: 3 }), fc.constantFrom(', ', ',', ' ,  '))
      .map(([ts, sep]) => ts.join(sep));
    const connection = fc
      .tuple(
        fc.subarray(['keep-alive', 'close', 'HTTP2-Settings', 'X-Extra', 'TE']),
        fc.constantFrom('Upgrade', 'upgrade', 'UPGRADE', null),
        fc.nat(),
      )
      .map(([rest, up, at]) => {
        const list = [...rest];
        // No upgrade asked: a plain request, closed after its answer so the exchange ends at once.
        if (up === null && !list.includes('close')) list.push('close');
        if (up !== null) list.splice(at % (list.length + 1), 0, up);
        return list.join(', ');
      });
    const settings = fc.option(
      fc.oneof(fc.base64String({ maxLength: 40 }), fc.stringMatching(/^[!-~]{0,30}$/), fc.constant('')),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST'),
        fc.constantFrom('/open', '/pay', '/both', '/nows', '/none'),
        upgrade,
        connection,
        settings,
        fc.boolean(),
        async (method, prefix, up, conn, h2s, keyed) => {
          seen.length = 0;
          const raw =
            `${method} ${prefix}/f HTTP/1.1\r\nHost: x\r\nConnection: ${conn}\r\nUpgrade: ${up}\r\n` +
            (h2s === null ? '' : `HTTP2-Settings: ${h2s}\r\n`) +
            (keyed ? `Authorization: Bearer ${key}\r\n` : '') +
            (method === 'POST' ? 'Content-Length: 0\r\n' : '') +
            '\r\n';
          const r = await rawExchange(port, raw, 5000);
          const status = statusOf(r.text);
          // Answered, never a 5xx, and the connection is let go (no hang).
          expect(status, raw).toBeGreaterThanOrEqual(100);
          expect(status, raw).toBeLessThan(500);
          expect(r.closed, raw).toBe(true);
          const allowed = ALLOWED[prefix] ?? [];
          const asksUpgrade = /(^|,)\s*upgrade\s*(,|$)/i.test(conn);
          const tunnel = asksUpgrade && allowed.includes(tokens(up)[0] as string);
          expect(seen.length, raw).toBeLessThanOrEqual(1);
          for (const s of seen) {
            const offers = values(s.rawHeaders, 'upgrade');
            if (!tunnel) {
              // Declined (or no upgrade at all): a plain request, without the offer.
              expect(s.via, raw).toBe('request');
              expect(offers, raw).toEqual([]);
              if (asksUpgrade) expect(values(s.rawHeaders, 'http2-settings'), raw).toEqual([]);
              for (const c of values(s.rawHeaders, 'connection')) expect(c.toLowerCase(), raw).not.toContain('upgrade');
            } else {
              // A tunnel: offered only protocols the route lists, the client's first among them first.
              expect(s.via, raw).toBe('upgrade');
              const sent = tokens(offers.join(','));
              expect(sent[0], raw).toBe(tokens(up)[0]);
              for (const p of sent) expect(allowed, raw).toContain(p);
            }
          }
          if (tunnel && seen.length === 1) expect(status, raw).toBe(101);
          if (!tunnel && seen.length === 1) expect(status, raw).toBe(200);
          // Nothing reaches the origin unchecked: a keyed route's request without its key never does.
          if (prefix === '/pay' && !keyed) expect(seen, raw).toEqual([]);
          if (prefix === '/none') expect(seen, raw).toEqual([]);
        },
      ),
      { numRuns: Math.min(RUNS, 150), seed: 20_250_611 },
    );
    // The gateway serves on, and holds nothing of all that.
    const after = await fetch(`${t.url}/open/after`);
    expect(after.status).toBe(200);
    await expect.poll(() => t.gw.tunnels.size, { timeout: 3000 }).toBe(0);
  }, 180_000);

  it('upgrade requests with a body (any framing, any route, a gateway key in it or not) never reach the origin: refused before it is asked', async () => {
    const framing = fc.oneof(
      fc.record({
        kind: fc.constant('content-length' as const),
        name: fc.constantFrom('Content-Length', 'content-length', 'CONTENT-LENGTH'),
        value: fc.constant(''),
      }),
      fc.record({
        kind: fc.constant('transfer-encoding' as const),
        name: fc.constantFrom('Transfer-Encoding', 'transfer-encoding', 'TRANSFER-ENCODING'),
        value: fc.constantFrom('chunked', 'Chunked', 'gzip, chunked'),
      }),
    );
    const body = fc.oneof(
      fc.constant(JSON.stringify({ token: key })),
      fc.constant(`token=${key}`),
      fc.string({ minLength: 1, maxLength: 60 }).map((v) => v.replace(/[\r\n]/g, ' ') || 'x'),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST', 'PUT'),
        fc.constantFrom('/open', '/pay', '/both', '/nows', '/none'),
        fc.constantFrom('websocket', 'WebSocket', 'h2c', 'foo/1'),
        framing,
        body,
        fc.boolean(),
        async (method, prefix, up, f, b, keyed) => {
          seen.length = 0;
          const bytes = Buffer.from(b, 'utf8');
          const framed =
            f.kind === 'content-length'
              ? `${f.name}: ${bytes.length}\r\n\r\n${b}`
              : `${f.name}: ${f.value}\r\n\r\n${bytes.length.toString(16)}\r\n${b}\r\n0\r\n\r\n`;
          const raw =
            `${method} ${prefix}/f HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: ${up}\r\n` +
            (keyed ? `Authorization: Bearer ${key}\r\n` : '') +
            framed;
          const r = await rawExchange(port, raw, 5000);
          const status = statusOf(r.text);
          // Refused by admission (no route, no key, no scope, a transfer coding it does not read: 501)
          // or for the body: never the origin's answer.
          expect([400, 401, 403, 404, 501], raw).toContain(status);
          expect(r.closed, raw).toBe(true);
          expect(seen, raw).toEqual([]);
          const coded = f.value.toLowerCase() === 'gzip, chunked';
          if (prefix !== '/pay' && prefix !== '/none') expect(status, raw).toBe(coded ? 501 : 400);
          if (status === 501) expect(r.text, raw).toContain('"param":"transfer-encoding"');
          if (status === 400) {
            const takes = (ALLOWED[prefix] ?? []).includes(up.toLowerCase());
            // A route that takes the offer names the field that gave it a body; one that does not, the offer.
            expect(r.text, raw).toContain(`"param":"${takes ? f.kind : 'upgrade'}"`);
            expect(r.text, raw).toContain('"type":"invalid_request"');
          }
        },
      ),
      { numRuns: Math.min(RUNS, 120), seed: 20_261_127 },
    );
    await expect.poll(() => t.gw.tunnels.size, { timeout: 3000 }).toBe(0);
  }, 180_000);
});
