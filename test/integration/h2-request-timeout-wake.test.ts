// Regression tests from a review of the HTTP/2 edge (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { F, frame, hpack, RawH2, request, T } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * docs/proxy.md: "A body not whole within `server.request_timeout_ms` (HTTP/1.1; over HTTP/2
 * the stream is reset) is answered 408 ... and the wake says 408; if the answer has already
 * begun ..., the wake says 408 too." Over HTTP/2 the edge resets the stream (CANCEL) at
 * request_timeout_ms, but the proxy only sees the stream close, unanswered, and records the
 * wake as 499 ("client closed request"): the client did not go away, the gateway cut it.
 */
describe('HTTP/2: a request body not whole within request_timeout_ms', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      server: { http2: 'h2c', request_timeout_ms: 1000, headers_timeout_ms: 500 },
      routes: [{ name: 'up', prefix: '/up', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const wakeOf = async (path: string) => {
    await sleep(100);
    await flushed(t.gw);
    const page = await t.gw.wakes.list({ environment: 'production', pathPattern: `^${path}$` }, 10, null);
    expect(page.rows).toHaveLength(1);
    return page.rows[0];
  };

  /** A POST announcing `length` bytes that sends `first` and then stalls; resolves once the stream is reset (3 s at most). */
  const stalledUpload = async (path: string, length: number, first: Buffer) => {
    const c = await RawH2.connect(port);
    c.write(frame(T.HEADERS, F.END_HEADERS, 1, hpack([...request(path, 'POST'), ['content-length', String(length)]])));
    for (let i = 0; i < first.length; i += 16_000) c.write(frame(T.DATA, 0, 1, first.subarray(i, i + 16_000)));
    const until = Date.now() + 3000;
    while (Date.now() < until && !c.frames.some((f) => f.stream === 1 && f.type === T.RST_STREAM)) await sleep(20);
    const rst = c.frames.find((f) => f.stream === 1 && f.type === T.RST_STREAM);
    c.destroy();
    return rst;
  };

  it('buffered body: the stream is reset, and its wake says 408 (not 499)', async () => {
    const rst = await stalledUpload('/up/buffered', 100, Buffer.from('abcd'));
    expect(rst, 'the edge reset the stream at request_timeout_ms').toBeDefined();
    const wake = await wakeOf('/up/buffered');
    expect(wake?.protocol).toBe('h2');
    expect(wake?.status, 'the gateway cut the body at request_timeout_ms: 408, as over HTTP/1.1').toBe(408);
  });

  it('streamed body (past buffer_request_body_bytes): the wake says 408 (not 502)', async () => {
    // 60 kB of a 2 MB body (streamed at once: past the 1 MiB buffer), within the 64 KiB window; then the client stalls.
    const rst = await stalledUpload('/up/streamed', 2_000_000, Buffer.alloc(60_000, 0x61));
    expect(rst).toBeDefined();
    const wake = await wakeOf('/up/streamed');
    // Observed: 502 upstream_unavailable (the origin's request failed when the stream was cut), blaming the origin.
    expect(wake?.status).toBe(408);
  });
});
