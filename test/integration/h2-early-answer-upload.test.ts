import http from 'node:http';
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const BIG = 4 * 1024 * 1024;

/**
 * Regression test from a review of the HTTP/2 edge (it failed on Node 20 and 26 before
 * the fix; Node 26 runs it through scripts/test-on-lts.sh).
 *
 * An HTTP/2 upload past buffer_request_body_bytes whose origin answers at once and closes
 * its connection without reading the body (nginx's client_max_body_size 413 does this).
 * The gateway answers its client (502, or the origin's 413) and records the wake; the
 * stream's streaming places (max_streaming_uploads_per_client, the origin's streaming
 * share) must then come back as they do over HTTP/1.1. They were held until
 * request_timeout_ms: the request body was no longer read (countedBody's iterator holds
 * the stream), the client's flow-control window never reopened, and the stream stayed
 * open. Once the answer is sent, the stream is now closed with RST_STREAM NO_ERROR.
 */
describe('HTTP/2 upload answered early by its origin', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      if (req.url?.startsWith('/open/limit')) {
        // Answers at once and closes, reading nothing of the body.
        res.writeHead(413, { 'content-type': 'text/plain', connection: 'close' });
        res.end('too large');
        return;
      }
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      server: {
        http2: 'h2c',
        buffer_request_body_bytes: 1024,
        max_streaming_uploads_per_client: 1,
        request_timeout_ms: 30_000,
      },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  /** The proxy's streaming-upload places, read from the edge (threads: 1). */
  const streaming = () => {
    // biome-ignore lint/suspicious/noExplicitAny: reads the proxy's private counters
    const p = t.gw.edge?.proxy as any;
    const slots = [...p.upstreams.slots.values()] as { streams: number }[];
    return { perAddress: p.streaming.size as number, originShare: slots.reduce((n, s) => n + s.streams, 0) };
  };

  it('gives back its streaming places once answered: the next upload from the address is served, not 503', async () => {
    const s = http2.connect(t.url);
    s.on('error', () => {});
    let closed = false;
    try {
      const answer = await new Promise<{ status: number; id: string }>((resolve, reject) => {
        const r = s.request({ ':method': 'POST', ':path': '/open/limit', 'content-length': String(BIG) });
        let status = 0;
        let id = '';
        r.on('response', (h) => {
          status = Number(h[':status']);
          id = String(h['x-wake-id']);
        });
        r.on('data', () => {});
        r.on('end', () => resolve({ status, id }));
        r.on('close', () => {
          closed = true;
        });
        r.on('error', reject);
        r.end(Buffer.alloc(BIG, 0x61));
      });
      // The gateway answered: its 502, or the origin's 413, whole.
      expect([413, 502], `answered ${answer.status}`).toContain(answer.status);
      // A moment later the next upload past the buffer from this address is served (over
      // HTTP/1.1 the places come back at once).
      await pause(1000);
      const next = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const q = http.request(
          `${t.url}/open/ok`,
          { method: 'POST', headers: { 'content-length': '65536' } },
          (res) => {
            let body = '';
            res.on('data', (c) => {
              body += c;
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        q.on('error', reject);
        q.end(Buffer.alloc(65_536, 0x62));
      });
      expect(next).toEqual({ status: 200, body: 'ok' });
      expect(streaming()).toEqual({ perAddress: 0, originShare: 0 });
      // The wake is recorded (not only once request_timeout_ms resets the stream).
      await flushed(t.gw);
      const page = await t.gw.wakes.list({ environment: 'production', pathPattern: '^/open/limit$' }, 10, null);
      expect(page.rows).toHaveLength(1);

      // The HTTP/2 client's stream is over too (its upload is not left hanging).
      expect(closed).toBe(true);
    } finally {
      s.destroy();
    }
  });
});
