import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/** Issue #25, item 2: slow uploads cannot hold the connections an origin's other requests need. */
describe('upstream starvation', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  let held: (() => void)[] = [];
  let originRequests = 0;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      originRequests++;
      req.resume();
      if (req.url?.startsWith('/hold')) {
        held.push(() => res.end('held'));
        return;
      }
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      // A small pool, so that a handful of clients is the whole attack.
      server: {
        upstream_connections: 4,
        buffer_request_body_bytes: 65_536,
        max_buffered_request_bytes: 150_000,
        max_streaming_uploads_per_client: 2,
      },
      routes: [
        { name: 'upload', prefix: '/upload', auth: 'none', origins: { production: origin.url } },
        { name: 'read', prefix: '/read', auth: 'none', origins: { production: origin.url } },
        { name: 'hold', prefix: '/hold', auth: 'none', queue_timeout_ms: 300, origins: { production: origin.url } },
      ],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    for (const h of held) h();
    await t.cleanup();
    await origin.close();
  });

  /** A client that sends the headers of a large POST and one byte, then stalls. */
  const stall = (length: number): net.Socket => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.write(
      `POST /upload/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: ${length}\r\n\r\nA`,
    );
    return s;
  };

  it('20 stalled uploads within the buffer hold no origin connection: a GET to the same origin is answered at once', async () => {
    const before = originRequests;
    const stalled = Array.from({ length: 20 }, () => stall(60_000));
    await new Promise((r) => setTimeout(r, 200));
    const t0 = performance.now();
    const r = await fetch(`${t.url}/read/x`, { signal: AbortSignal.timeout(3000) });
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('ok');
    expect(performance.now() - t0).toBeLessThan(1000);
    // None of the stalled uploads reached the origin: they are still being read.
    expect(originRequests).toBe(before + 1);
    for (const s of stalled) s.destroy();
  });

  it('bodies held before forwarding are bounded in all (max_buffered_request_bytes): past it 503, and a client gone gives its share back', async () => {
    /** Sends 60,000 bytes of a 64,000-byte body and stalls; resolves with the answer's status line, if one comes. */
    const partial = () => {
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => {});
      let text = '';
      s.on('data', (c: Buffer) => {
        text += c.toString();
      });
      s.write(`POST /upload/x HTTP/1.1\r\nHost: x\r\nContent-Length: 64000\r\n\r\n${'a'.repeat(60_000)}`);
      return { s, status: () => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text: () => text };
    };
    const a = partial();
    const b = partial();
    await new Promise((r) => setTimeout(r, 200));
    const c = partial();
    await expect.poll(c.status, { timeout: 3000 }).toBe(503);
    expect(c.text()).toContain('max_buffered_request_bytes');
    expect([a.status(), b.status()]).toEqual([0, 0]);
    for (const p of [a, b, c]) p.s.destroy();
    await new Promise((r) => setTimeout(r, 200));
    // Their shares are back: a body as large is read and forwarded.
    const ok = await fetch(`${t.url}/upload/y`, { method: 'POST', body: 'b'.repeat(60_000) });
    expect(ok.status).toBe(200);
  });

  it('bodies past the buffer stream, at most max_streaming_uploads_per_client at once from one address (503 past it)', async () => {
    const big = [stall(1_000_000), stall(1_000_000)];
    await new Promise((r) => setTimeout(r, 200));
    const third = await new Promise<string>((resolve) => {
      const s = stall(1_000_000);
      let text = '';
      s.on('data', (c: Buffer) => {
        text += c.toString();
        if (text.includes('\r\n\r\n')) {
          s.destroy();
          resolve(text);
        }
      });
    });
    expect(third).toMatch(/^HTTP\/1\.1 503/);
    expect(third).toContain('max_streaming_uploads_per_client');
    for (const s of big) s.destroy();
  });

  it('waiting for a free origin connection is bounded by queue_timeout_ms, then 503', async () => {
    // Let the streams of the test before go.
    await new Promise((r) => setTimeout(r, 200));
    const holding = Array.from({ length: 4 }, (_, i) => fetch(`${t.url}/hold/${i}`).catch(() => null));
    await expect.poll(() => held.length, { timeout: 3000 }).toBe(4);
    const t0 = performance.now();
    const r = await fetch(`${t.url}/hold/5`);
    const waited = performance.now() - t0;
    expect(r.status).toBe(503);
    const body = (await r.json()) as { error: { type: string; message: string } };
    expect(body.error.type).toBe('service_unavailable');
    expect(body.error.message).toContain('queue_timeout_ms');
    expect(waited).toBeGreaterThanOrEqual(250);
    expect(waited).toBeLessThan(3000);
    // A slot given back serves the next request.
    for (const h of held) h();
    held = [];
    await Promise.all(holding);
    expect((await fetch(`${t.url}/read/again`)).status).toBe(200);
  });
});
