// Regression tests from a review of this session's changes (2026-11-28): request trailers forwarded to the origin (af07198).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/** server.buffer_request_body_bytes of the gateway under test: bodies past it stream to the origin. */
const BUFFER = 16_384;
const BIG = 'b'.repeat(BUFFER * 3);

describe("a client's request trailers as they reach the origin", () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  let seen: { headers: Record<string, unknown>; trailers: string[] }[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push({ headers: { ...req.headers }, trailers: [...req.rawTrailers] });
        res.writeHead(200, { 'content-length': '2' });
        res.end('ok');
      });
    });
    t = await startGateway({
      server: { buffer_request_body_bytes: BUFFER },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });
  beforeEach(() => {
    seen = [];
  });

  const post = (body: string, trailers: string, connection = 'close') => {
    let chunks = '';
    for (let i = 0; i < body.length; i += 4096) {
      const c = body.slice(i, i + 4096);
      chunks += `${c.length.toString(16)}\r\n${c}\r\n`;
    }
    return rawExchange(
      port,
      `POST /open/upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: ${connection}\r\n\r\n${chunks}0\r\n${trailers}\r\n`,
      10_000,
    );
  };

  /**
   * docs/security.md: "A client's request trailers are filtered like its headers". Its headers'
   * rules drop X-Real-IP (and X_Real_IP) from an untrusted client: "a client's own word for its
   * address" (headers.ts OWN_PREFIXES). trailers.ts's filter has no such rule, so the field the
   * header filter drops reaches the origin as a trailer — now after every streamed body too.
   */
  for (const [what, body] of [
    ['streamed (past buffer_request_body_bytes)', BIG],
    ['buffered', 'small'],
  ] as const)
    it(`${what}: an untrusted client's X-Real-IP / X_Real_IP trailer never reaches the origin, as the header does not`, async () => {
      const r = await post(body, 'X-Real-IP: 10.9.9.9\r\nX_Real_IP: 10.9.9.8\r\nx-checksum: abc\r\n');
      expect(statusOf(r.text)).toBe(200);
      expect(seen).toHaveLength(1);
      // The filter ran (x-checksum passes)...
      expect(seen[0]?.trailers).toContain('x-checksum');
      // ...and the client's word for its address went with it.
      expect(seen[0]?.trailers.join('\n')).not.toContain('10.9.9.');
    });

  /**
   * A field the request's Connection header names is hop-by-hop (RFC 9110 §7.6.1): the header
   * rules drop it (headers.ts connectionTokens), and an origin's answer has it dropped from its
   * trailers too (responseTrailerPairs' `named`). A client's request trailers are not held to it:
   * a field its Connection named for this hop alone reaches the origin after the last chunk.
   */
  it("a trailer the request's Connection header names as hop-by-hop never reaches the origin", async () => {
    const r = await post(BIG, 'X-Hop: secret-for-this-hop\r\nx-checksum: abc\r\n', 'close, X-Hop');
    expect(statusOf(r.text)).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.trailers).toContain('x-checksum');
    expect(seen[0]?.trailers.join('\n')).not.toContain('secret-for-this-hop');
  });
});
