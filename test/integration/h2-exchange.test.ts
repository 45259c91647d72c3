import type { ClientHttp2Session } from 'node:http2';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createH2Edge, type H2Edge } from '../../src/h2/edge.js';
import type { H2Response } from '../../src/h2/exchange.js';
import { createLogger } from '../../src/log.js';
import type { ClientRequest, ClientResponse } from '../../src/proxy/client.js';
import { h2connect, h2request } from '../helpers/h2.js';
import { F, frame, hpack, RawH2, request, settings, T } from '../helpers/h2-frames.js';

/** server.send_timeout_ms of the edge under test: what the flush sweep cuts by. */
const SEND_TIMEOUT = 300;

/**
 * The HTTP/2 stand-in for a response (exchange.ts) under the edge, with a handler of
 * the test's own in place of the proxy: the stream's one close listener and the
 * answer's last bytes ending the stream in the same call.
 */
describe('HTTP/2 edge: a stream as the proxy sees it', () => {
  let edge: H2Edge;
  let server: net.Server;
  let url: string;
  let session: ClientHttp2Session;
  let serve: (req: ClientRequest, res: ClientResponse) => void = () => {};

  beforeAll(async () => {
    edge = createH2Edge({
      limits: { max_concurrent_streams: 100, max_header_list_bytes: 65_536, max_resets_per_10s: 200 },
      idleTimeoutMs: 30_000,
      requestTimeoutMs: 0,
      sendTimeoutMs: SEND_TIMEOUT,
      handle: (req, res) => serve(req, res),
      http1Only: () => false,
      goaway: { labels: () => ({ inc() {} }) },
      log: createLogger('error', () => {}),
      now: () => 0,
      threadLabel: null,
    });
    server = net.createServer((s) => edge.accept(s));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    session = await h2connect(url);
  });

  afterAll(async () => {
    session.close();
    edge.close();
    await new Promise((r) => server.close(r));
  });

  it("calls the proxy's close listeners once, in order, less those taken off, from one listener on the stream", async () => {
    const calls: string[] = [];
    let listeners = -1;
    const closed = new Promise<void>((resolve) => {
      serve = (_req, res) => {
        const b = () => calls.push('b');
        res.on('close', () => calls.push('a'));
        res.once('close', b);
        res.once('close', () => calls.push('c'));
        res.off('close', b);
        res.once('close', () => {
          calls.push('d');
          resolve();
        });
        listeners = (res as H2Response).stream.listenerCount('close');
        res.writeHead(200, ['content-type', 'text/plain', 'content-length', '2']);
        res.end('ok');
      };
    });
    const answer = await h2request(session, { ':path': '/one' });
    await closed;
    expect(answer.text).toBe('ok');
    expect(calls).toEqual(['a', 'c', 'd']);
    expect(listeners).toBe(1);
  });

  it("calls them when the client resets the stream, and the answer's close listener sees it unfinished", async () => {
    let finished: boolean | null = null;
    let endedAfter: boolean | null = null;
    let served = (): void => {};
    const handed = new Promise<void>((r) => {
      served = r;
    });
    const closed = new Promise<void>((resolve) => {
      serve = (_req, res) => {
        res.on('close', () => {
          finished = res.writableFinished;
          // An answer ended after the reset is no more finished: it never reached the client.
          res.end();
          endedAfter = res.writableFinished;
          resolve();
        });
        served();
      };
    });
    const r = session.request({ ':path': '/reset' });
    r.on('error', () => {});
    // Reset once the proxy holds the stream (a reset in the same read as HEADERS is never served).
    await handed;
    r.close(0x8);
    await closed;
    expect(finished).toBe(false);
    expect(endedAfter).toBe(false);
  });

  it('ends the stream with the last bytes Content-Length announced, and end() after them changes nothing', async () => {
    const seen: { endedByWrite: boolean[]; wrote: boolean[] } = { endedByWrite: [], wrote: [] };
    serve = (_req, res) => {
      const s = (res as H2Response).stream;
      res.writeHead(200, ['content-type', 'text/plain', 'content-length', '10']);
      seen.wrote.push(res.write(Buffer.from('hello ')));
      seen.endedByWrite.push(s.writableEnded);
      seen.wrote.push(res.write(Buffer.from('you!')));
      seen.endedByWrite.push(s.writableEnded);
      res.end();
    };
    const a = await h2request(session, { ':path': '/two-chunks' });
    expect(a.status).toBe(200);
    expect(a.text).toBe('hello you!');
    expect(seen.endedByWrite).toEqual([false, true]);
    expect(seen.wrote).toEqual([true, true]);
  });

  it('writeHead with a status HTTP/2 cannot carry (1xx final, 600-999) never throws: a 502 error body in its place, the rest dropped', async () => {
    for (const status of [101, 199, 600, 700, 999]) {
      const threw: unknown[] = [];
      serve = (_req, res) => {
        try {
          res.writeHead(status, 'Odd', ['content-type', 'text/plain', 'trailer', 'x-t', 'x-wake-id', 'wk_1']);
          expect(res.write(Buffer.from('origin body'))).toBe(true);
          res.addTrailers([['x-t', '1']]);
          res.end();
        } catch (e) {
          threw.push(e);
        }
      };
      const a = await h2request(session, { ':path': `/status-${status}` });
      expect(threw, String(status)).toEqual([]);
      expect(a.status).toBe(502);
      expect(a.headers['x-wake-id']).toBe('wk_1');
      expect(a.headers['cache-control']).toBe('no-store');
      const body = JSON.parse(a.text);
      expect(body.error).toMatchObject({ type: 'upstream_unavailable', wake_id: 'wk_1' });
      expect(body.error.message).toContain(`status ${status}`);
      expect(a.trailers['x-t']).toBeUndefined();
    }
  });

  it('without Content-Length (or with trailers to come) the stream ends only at end()', async () => {
    const endedByWrite: boolean[] = [];
    serve = (_req, res) => {
      const s = (res as H2Response).stream;
      res.writeHead(200, ['content-type', 'text/plain']);
      res.write(Buffer.from('abc'));
      endedByWrite.push(s.writableEnded);
      res.end();
    };
    expect((await h2request(session, { ':path': '/no-length' })).text).toBe('abc');
    serve = (_req, res) => {
      const s = (res as H2Response).stream;
      res.writeHead(200, ['content-type', 'text/plain', 'content-length', '3', 'trailer', 'x-sum']);
      res.write(Buffer.from('abc'));
      endedByWrite.push(s.writableEnded);
      res.addTrailers([['x-sum', '42']]);
      res.end();
    };
    const t = await h2request(session, { ':path': '/trailers' });
    expect(t.text).toBe('abc');
    expect(t.trailers['x-sum']).toBe('42');
    expect(endedByWrite).toEqual([false, false]);
  });

  it("a last chunk past the stream's buffer says true (an ended stream never drains: false would leave the origin paused for good), and the client still gets it whole", async () => {
    const big = Buffer.alloc(256 * 1024, 1);
    let wrote: boolean | null = null;
    serve = (_req, res) => {
      res.writeHead(200, ['content-type', 'application/octet-stream', 'content-length', String(big.length)]);
      wrote = res.write(big);
      res.end();
    };
    const a = await h2request(session, { ':path': '/big' });
    expect(a.body.equals(big)).toBe(true);
    expect(wrote).toBe(true);
  });
  it('an answer ended behind a window its client never opens is cut by the edge (within two send timeouts), with no timer of the proxy', async () => {
    let ended = 0;
    serve = (_req, res) => {
      res.writeHead(200, ['content-type', 'text/plain', 'content-length', '5']);
      res.write(Buffer.from('hello'));
      ended++;
    };
    const port = (server.address() as net.AddressInfo).port;
    const c = await RawH2.connect(port, false);
    c.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), settings([[0x4, 0]])]));
    const t0 = Date.now();
    c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, hpack(request('/held'))));
    const cut = () => c.frames.some((f) => f.type === T.RST_STREAM && f.stream === 1);
    while (Date.now() - t0 < 5000 && !cut()) await new Promise((r) => setTimeout(r, 20));
    const took = Date.now() - t0;
    c.destroy();
    expect(ended).toBe(1);
    expect(cut()).toBe(true);
    expect(c.frames.some((f) => f.type === T.DATA)).toBe(false);
    expect(took).toBeGreaterThanOrEqual(SEND_TIMEOUT - 50);
    // A reader on the same edge meanwhile gets its answer whole.
    const a = await h2request(session, { ':path': '/read' });
    expect(a.body.toString()).toBe('hello');
  });
});
