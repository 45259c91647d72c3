// Regression tests from a review of the HTTP/2 edge (2026-11-28).
import { brotliCompressSync, brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2once } from '../helpers/h2.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * RFC 9110 §8.4: Content-Encoding lists the codings "in the order in which they were
 * applied", and §5.3 lets it come as several field lines, which are one list. An origin
 * that answers `Content-Encoding: gzip` and `Content-Encoding: br` (gzip, then br) sends
 * br(gzip(x)). An HTTP/1.1 client through the gateway gets both lines; an HTTP/2 client
 * gets `content-encoding: gzip` only (h2/fields.ts addField keeps the first of a field Node
 * sends once), so it cannot decode the body it got. DESIGN.md: each stream "the same ...
 * headers" as HTTP/1.1.
 */
describe('HTTP/2: an origin answer with Content-Encoding on two lines', () => {
  let origin: TestServer;
  let t: TestGateway;
  const TEXT = 'hello, two codings';
  const BODY = brotliCompressSync(gzipSync(Buffer.from(TEXT)));

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(200, [
        'Content-Type',
        'text/plain',
        'Content-Encoding',
        'gzip',
        'Content-Encoding',
        'br',
        'Content-Length',
        String(BODY.length),
      ]);
      res.end(BODY);
    });
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  /** Undoes `codings` (as listed, applied in that order) from last to first. */
  const decode = (body: Buffer, codings: string[]): string => {
    let b = body;
    for (const c of [...codings].reverse()) b = c === 'br' ? brotliDecompressSync(b) : c === 'gzip' ? gunzipSync(b) : b;
    return b.toString();
  };
  const list = (v: string | string[] | undefined) =>
    (Array.isArray(v) ? v.join(',') : (v ?? ''))
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');

  it('control: an HTTP/1.1 client gets both codings and decodes the body', async () => {
    const r = await fetch(`${t.url}/open/x`, { headers: { 'accept-encoding': 'identity' } });
    // undici undoes both codings itself.
    expect(await r.text()).toBe(TEXT);
  });

  it('an HTTP/2 client gets the whole list (gzip, br), so the body decodes', async () => {
    const r = await h2once(t.url, { ':path': '/open/x' });
    expect(r.status).toBe(200);
    expect(r.body.equals(BODY)).toBe(true);
    // Observed: content-encoding "gzip" alone; the client then gunzips a brotli stream.
    expect(list(r.headers['content-encoding'])).toEqual(['gzip', 'br']);
    expect(decode(r.body, list(r.headers['content-encoding']))).toBe(TEXT);
  });
});
