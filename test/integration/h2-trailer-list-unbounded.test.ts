// Regression tests from a review of the HTTP/2 edge (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { F, frame, hpack, RawH2, request, T } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An HPACK integer with an n-bit prefix (RFC 7541 §5.1). */
const int = (v: number, n: number, first: number): number[] => {
  const max = (1 << n) - 1;
  if (v < max) return [first | v];
  const out = [first | max];
  let rest = v - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
};

/**
 * docs/security.md: "a header list past `max_header_list_bytes` (64 KiB, sized as RFC 9113
 * §6.5.2 has it) is answered `431` ... and never forwarded, whether or not the client
 * acknowledged the SETTINGS that announce it". SETTINGS_MAX_HEADER_LIST_SIZE bounds every
 * field section, trailers too (RFC 9113 §6.5.2, §8.1). The edge measures only the request's
 * header section (h2/edge.ts headerListSize(raw)); its trailer section (exchange.ts
 * `stream.once('trailers')` -> rawTrailers) is never measured, and Node bounds it only once
 * the client acknowledged the SETTINGS. A 6 kB trailers frame (one 4 kB field indexed, then
 * referenced 1,990 times) becomes an 8 MB trailer field forwarded to the origin (and scanned
 * for keys on the way). Over HTTP/1.1, Node's parser holds trailers to max_header_bytes.
 */
describe('HTTP/2: a request trailer section past max_header_list_bytes', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const seen: { url: string; trailerBytes: number }[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push({ url: req.url ?? '', trailerBytes: req.rawTrailers.join('').length });
        res.end('ok');
      });
    });
    // An origin that takes any size, so what the gateway forwards is seen whole.
    // (Node reads the server's maxHeaderSize for each connection; its types do not name it.)
    (origin.server as unknown as { maxHeaderSize: number }).maxHeaderSize = 64 * 1024 * 1024;
    t = await startGateway({
      server: {
        http2: 'h2c',
        http2_limits: { max_concurrent_streams: 100, max_header_list_bytes: 65_536, max_resets_per_10s: 200 },
      },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('is never forwarded to the origin (the request refused, 431, as a header list past the limit is)', async () => {
    const c = await RawH2.connect(port); // the server's SETTINGS never acknowledged
    const name = Buffer.from('x-b');
    const value = Buffer.alloc(4000, 0x61);
    const indexed = Buffer.concat([
      Buffer.from([0x40, name.length]),
      name,
      Buffer.from(int(value.length, 7, 0)),
      value,
    ]);
    c.write(frame(T.HEADERS, F.END_HEADERS, 1, hpack(request('/open/trailers', 'POST'))));
    c.write(frame(T.DATA, 0, 1, Buffer.from('x')));
    const trailers = Buffer.concat([indexed, Buffer.alloc(1990, 0x80 | 62)]);
    c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, trailers));
    const until = Date.now() + 10_000;
    while (
      Date.now() < until &&
      !c.frames.some((f) => f.stream === 1 && (f.type === T.RST_STREAM || (f.flags & F.END_STREAM) !== 0))
    )
      await sleep(20);
    await sleep(200);
    c.destroy();
    expect(trailers.length).toBeLessThan(7000);
    // Observed: [{ url: '/open/trailers', trailerBytes: 7967983 }].
    const past = seen.filter((s) => s.trailerBytes > 65_536);
    expect(past, 'trailer bytes the origin received past max_header_list_bytes').toEqual([]);
  });
});
