// Regression tests from a review of this session's changes (2026-11-28): an origin's Content-Length trailer (af07198, llhttp's lenient chunked-length flag).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/**
 * docs/proxy.md now says: "A `Content-Length` in an origin's trailer section is ignored, as
 * RFC 9110 §6.5.1 says (dropped, the answer relayed whole)". The lenient flag only lifts
 * llhttp's "Content-Length beside Transfer-Encoding" check: llhttp still parses the trailer's
 * value as a framing length, so a trailer Content-Length in any other spelling (a list of
 * equal values, RFC 9110 §8.6; the field twice; a value that is no number) still fails the
 * answer after its body was relayed, and the client's connection is cut mid-answer.
 */
const TRAILERS: Record<string, string> = {
  '/raw/cl-list': 'Content-Length: 5, 5\r\nX-Sum: 1\r\n',
  '/raw/cl-twice': 'Content-Length: 5\r\nContent-Length: 5\r\nX-Sum: 1\r\n',
  '/raw/cl-word': 'Content-Length: five\r\nX-Sum: 1\r\n',
  // The one spelling the change was tested with: relayed whole (the control).
  '/raw/cl-one': 'Content-Length: 5\r\nX-Sum: 1\r\n',
};

async function rawOrigin(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    let buf = '';
    s.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      for (;;) {
        const at = buf.indexOf('\r\n\r\n');
        if (at === -1) return;
        const head = buf.slice(0, at);
        buf = buf.slice(at + 4);
        const path = head.split(' ')[1] ?? '';
        const t = TRAILERS[path];
        s.write(
          t === undefined
            ? 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n'
            : `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n0\r\n${t}\r\n`,
          'latin1',
        );
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

describe("an origin's Content-Length trailer, as other origins spell it", () => {
  let raw: Awaited<ReturnType<typeof rawOrigin>>;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    raw = await rawOrigin();
    t = await startGateway({
      routes: [{ name: 'raw', prefix: '/raw', auth: 'none', timeout_ms: 2000, origins: { production: raw.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await raw?.close();
  });

  /** The answer as an HTTP/1.1 client has it: whole means its last chunk came (and the X-Sum trailer with it). */
  const get = async (path: string) => {
    const r = await rawExchange(port, `GET ${path} HTTP/1.1\r\nHost: x\r\nTE: trailers\r\nConnection: close\r\n\r\n`);
    return { status: statusOf(r.text), tail: r.text.slice(r.text.indexOf('\r\n\r\n') + 4) };
  };

  it('control: one Content-Length trailer is dropped and the answer relayed whole', async () => {
    const r = await get('/raw/cl-one');
    expect(r.status).toBe(200);
    expect(r.tail).toMatch(/^5\r\nhello\r\n0\r\n(.*\r\n)*\r\n$/);
  });

  for (const path of ['/raw/cl-list', '/raw/cl-twice', '/raw/cl-word'])
    it(`${path}: the trailer is dropped and the answer relayed whole, as the docs say (it is cut after its body)`, async () => {
      const r = await get(path);
      // What happens: the client has nothing at all (the answer failed within the one read
      // that held its head, body and trailers), its connection closed.
      expect(r.status).toBe(200);
      // Whole: the last chunk and the end of the trailer section reached the client.
      expect(r.tail).toMatch(/^5\r\nhello\r\n0\r\n(.*\r\n)*\r\n$/);
      expect(r.tail).not.toMatch(/content-length/i);
    });
});
