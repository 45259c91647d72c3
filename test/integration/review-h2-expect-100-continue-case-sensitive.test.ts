// Regression tests from a review of TLS and HTTP/2 at the edge (2026-11-28).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2connect } from '../helpers/h2.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * RFC 9110 §10.1.1: "The Expect field value is case-insensitive", and 100-continue asks the
 * server to say 100 before the body is sent. docs/security.md / h2 edge: "Each stream is a
 * request like any other (the same routes, keys, ... and limits)"; over HTTP/1.1 Node's
 * parser matches /100-continue/i and the gateway answers 100 once admission passed.
 * src/h2/edge.ts hands the proxy `headers.expect === '100-continue'`: an exact, case-sensitive
 * compare, so `expect: 100-Continue` on an h2 stream is never answered 100. A client that
 * waits for it (as RFC 9110 lets it) stalls until its own timeout, or until
 * request_timeout_ms resets the stream.
 */
describe('HTTP/2 Expect: 100-continue is case-insensitive, as on HTTP/1.1', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      let n = 0;
      req.on('data', (c: Buffer) => {
        n += c.length;
      });
      req.on('end', () => res.end(String(n)));
    });
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  /** HTTP/1.1: what comes back within 1.5 s to a POST that sends only its head. */
  const h1Head = (expectValue: string) =>
    new Promise<string>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () =>
        s.write(`POST /open/h1 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nExpect: ${expectValue}\r\n\r\n`),
      );
      let got = '';
      s.on('data', (c: Buffer) => {
        got += c.toString('latin1');
      });
      s.on('error', () => {});
      setTimeout(() => {
        s.destroy();
        resolve(got.split('\r\n')[0] ?? '');
      }, 1500);
    });

  /** HTTP/2: whether the stream got its 100 within 1.5 s (the body held back until then). */
  const h2Continued = async (expectValue: string) => {
    const s = await h2connect(t.url);
    try {
      return await new Promise<boolean>((resolve) => {
        const r = s.request({ ':method': 'POST', ':path': '/open/h2', 'content-length': '5', expect: expectValue });
        r.on('error', () => {});
        // The answer is read, so the stream (and the session's close) ends.
        r.resume();
        const timer = setTimeout(() => {
          r.close();
          resolve(false);
        }, 1500);
        r.on('continue', () => {
          clearTimeout(timer);
          r.end('hello');
          resolve(true);
        });
      });
    } finally {
      s.close();
    }
  };

  it('HTTP/1.1 answers 100 to either spelling (the rule h2 should follow)', async () => {
    expect(await h1Head('100-continue')).toBe('HTTP/1.1 100 Continue');
    expect(await h1Head('100-Continue')).toBe('HTTP/1.1 100 Continue');
  });

  it('HTTP/2 answers 100 to 100-continue, and to 100-Continue alike', async () => {
    expect(await h2Continued('100-continue')).toBe(true);
    expect(await h2Continued('100-Continue'), 'no :status 100 within 1.5 s for expect: 100-Continue').toBe(true);
  });
});
