// Regression tests from a review of the HTTP/2 edge (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { F, frame, hpack, RawH2, T } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * RFC 9113 §8.3.1: a Host that identifies another entity than :authority makes the request
 * malformed, and "The values of fields need to be normalized to compare them (see Section 6.2
 * of [RFC3986]). An origin server can apply any normalization method, whereas other servers
 * MUST perform scheme-based normalization (see Section 6.2.3 of [RFC3986]) of the two
 * fields." For `http`, `localhost`, `localhost:80` and `localhost:` are one authority
 * (RFC 3986 §6.2.3, RFC 9110 §4.2.3). The gateway (h2/guards.ts otherHost) compares the two
 * strings without case only, so a client (or an HTTP/1.1-to-HTTP/2 proxy in front) that
 * sends the default port in one field and not in the other is refused 400 "malformed
 * request". docs/security.md: "a request that sends both must name the same authority".
 */
describe('HTTP/2: Host and :authority naming one authority, one with the default port', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  /** One GET on h2c (:scheme http) with `authority` and `host`: its status. */
  const statusOf = async (authority: string, host: string): Promise<number> => {
    const c = await RawH2.connect(port);
    const fields: [string, string][] = [
      [':method', 'GET'],
      [':scheme', 'http'],
      [':authority', authority],
      [':path', '/open/x'],
      ['host', host],
    ];
    c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, hpack(fields)));
    const until = Date.now() + 3000;
    while (Date.now() < until && !c.frames.some((f) => f.stream === 1 && f.type === T.HEADERS)) await sleep(20);
    c.destroy();
    const h = c.frames.find((f) => f.stream === 1 && f.type === T.HEADERS);
    // The gateway's answers here are literal-free HPACK from Node: read ':status' from its static-table index.
    if (h === undefined) return 0;
    const b = h.payload[0] as number;
    const table: Record<number, number> = { 136: 200, 137: 204, 138: 206, 139: 304, 140: 400, 141: 404, 142: 500 };
    return table[b] ?? -1;
  };

  it('control: the same string in both is served', async () => {
    expect(await statusOf('localhost', 'localhost')).toBe(200);
  });

  it('control: another host is refused 400', async () => {
    expect(await statusOf('localhost', 'other.example')).toBe(400);
  });

  it.each([
    ['localhost', 'localhost:80'],
    ['localhost:80', 'localhost'],
    ['localhost', 'localhost:'],
  ])(':authority %s with Host %s (scheme http) is one authority: served, not 400', async (authority, host) => {
    // Observed: 400 invalid_request "malformed request".
    expect(await statusOf(authority, host)).toBe(200);
  });
});
