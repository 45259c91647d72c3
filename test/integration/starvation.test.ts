import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where slow /v2 bodies meet two edge threads (on an older Node that part skips).

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
    expect(performance.now() - t0).toBeLessThan(2500);
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

/** Opens a connection that sends the headers of a POST to `path` and part of its body, then stalls. */
function slowPost(port: number, path: string, headers: string): net.Socket {
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => {});
  s.write(
    `POST ${path} HTTP/1.1\r\nHost: x\r\n${headers}Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{"la`,
  );
  return s;
}

/** Resolves once `n` sockets are connected. */
const connected = (socks: net.Socket[]) =>
  Promise.all(socks.map((s) => (s.readyState === 'open' ? null : new Promise((r) => s.once('connect', r)))));

/** Issue #34, item 6: a /v2 call on the main listener is read whole on the edge before it is handed on. */
describe('slow /v2 bodies on the main listener', () => {
  let t: TestGateway;
  let port: number;
  beforeAll(async () => {
    t = await startGateway({ server: { api_body_timeout_ms: 600, api_body_limit_bytes: 4096 } });
    port = Number(new URL(t.url).port);
  });
  afterAll(() => t.cleanup());

  it("160 slow POSTs to /v2 are open: an operator's GET /v2/api-keys answers promptly (threads: 1)", async () => {
    const auth = `Authorization: Bearer ${t.admin}\r\n`;
    const slow = Array.from({ length: 160 }, () => slowPost(port, '/v2/api-keys', auth));
    await connected(slow);
    const t0 = performance.now();
    const r = await fetch(`${t.url}/v2/api-keys?limit=1`, {
      headers: { authorization: `Bearer ${t.admin}` },
      signal: AbortSignal.timeout(5000),
    });
    expect(r.status).toBe(200);
    expect(performance.now() - t0).toBeLessThan(3000);
    for (const s of slow) s.destroy();
  });

  it('a /v2 body that is not whole within server.api_body_timeout_ms gets 408 from the edge; one past api_body_limit_bytes 413', async () => {
    const auth = `Authorization: Bearer ${t.admin}\r\n`;
    const req = `POST /v2/api-keys HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{"la`;
    const slow = await rawExchange(port, req, 5000);
    expect(statusOf(slow.text)).toBe(408);
    expect(slow.text).toContain('api_body_timeout_ms');
    expect(slow.closed).toBe(true);
    expect(slow.ms).toBeGreaterThanOrEqual(500);
    expect(slow.ms).toBeLessThan(4000);
    const big = `POST /v2/api-keys HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1400\r\n${'a'.repeat(5120)}\r\n`;
    const tooBig = await rawExchange(port, big, 3000);
    expect(statusOf(tooBig.text)).toBe(413);
    expect(tooBig.text).toContain('"type":"payload_too_large"');
    // A whole body within the limits is still answered by the API.
    const ok = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'after-slow', environment: 'production', scopes: ['wakes:read'] }),
    });
    expect(ok.status, await ok.clone().text()).toBe(201);
  });
  it('Expect: 100-continue on /v2: a refused key gets 401 at once without the body (never 100, never 408); a live one gets 100 and its answer', async () => {
    const head = (key: string, length: number) =>
      `POST /v2/api-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`;
    const bad = await rawExchange(port, head(`svc_live_${'y'.repeat(43)}`, 10), 3000);
    expect(statusOf(bad.text)).toBe(401);
    expect(bad.text).not.toContain('100 Continue');
    expect(bad.ms).toBeLessThan(2500);
    const body = JSON.stringify({ label: 'expect', environment: 'production', scopes: ['wakes:read'] });
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      if (text === 'HTTP/1.1 100 Continue\r\n\r\n') s.write(body);
    });
    s.write(head(t.admin, Buffer.byteLength(body)).replace('HTTP/1.1\r\n', 'HTTP/1.1\r\nConnection: close\r\n'));
    await new Promise((r) => s.on('close', r));
    expect(text.startsWith('HTTP/1.1 100 Continue')).toBe(true);
    expect(text).toContain('HTTP/1.1 201');
  });
});

/**
 * The same through edge threads (the handover to the control thread's internal
 * listener), where the runtime has SO_REUSEPORT (Node 22.12 or later on Linux).
 */
describe.runIf(hasReusePort())('slow /v2 bodies with two edge threads', () => {
  let g: ChildGateway;
  let dir: string;
  const admin = `svc_live_${newSecret()}`;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-handover-'));
    writeFileSync(join(dir, 'cfg.yaml'), 'server: { threads: 2 }\nlog: { level: info }\n');
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: admin,
    });
  }, 60_000);
  afterAll(async () => {
    if (g && g.proc.exitCode === null) {
      g.proc.kill('SIGTERM');
      await g.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it("200 slow POSTs to /v2 hold no handover socket: an operator's calls answer promptly on both threads", async () => {
    const auth = `Authorization: Bearer ${admin}\r\n`;
    const slow = Array.from({ length: 200 }, () => slowPost(g.port, '/v2/api-keys', auth));
    await connected(slow);
    await new Promise((r) => setTimeout(r, 200));
    for (let i = 0; i < 6; i++) {
      const t0 = performance.now();
      const r = await fetch(`${g.url}/v2/api-keys?limit=1`, {
        headers: { authorization: `Bearer ${admin}`, connection: 'close' },
        signal: AbortSignal.timeout(3000),
      });
      expect(r.status).toBe(200);
      expect(performance.now() - t0).toBeLessThan(1500);
    }
    for (const s of slow) s.destroy();
  });
});

/** Opens a connection from `from` (a loopback address) that asks for `path` and never reads. */
function pausedGet(port: number, path: string, from: string): { s: net.Socket; closed: Promise<number> } {
  const s = net.connect({ port, host: '127.0.0.1', localAddress: from });
  s.on('error', () => {});
  const t0 = performance.now();
  const closed = new Promise<number>((r) => s.on('close', () => r(performance.now() - t0)));
  s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  s.pause();
  return { s, closed };
}

/** A GET from `from` on a connection of its own: its status, or 0 when none came in time. */
async function getFrom(port: number, path: string, from: string, timeoutMs = 4000): Promise<number> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress: from });
    let text = '';
    const timer = setTimeout(() => {
      s.destroy();
      resolve(0);
    }, timeoutMs);
    s.on('error', () => {});
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1');
    });
    s.on('close', () => {
      clearTimeout(timer);
      resolve(statusOf(text));
    });
    s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  });
}

const MIB = 1_048_576;
const BIG = Buffer.alloc(24 * MIB, 98);

/** An origin answering /twelve (12 MiB), /large (24 MiB) and anything else "ok", counting what it has open, wrote whole, and was let go of. */
async function countingOrigin() {
  const o = { open: 0, finished: 0, aborted: 0, server: null as unknown as TestServer };
  o.server = await startServer((req, res) => {
    o.open++;
    const sock = req.socket;
    // Written whole: the kernel took every byte (a 'finish' only says Node's buffer did).
    let whole = false;
    const done = () => {
      if (whole) return;
      whole = true;
      o.finished++;
    };
    res.on('finish', () => (sock.writableLength === 0 ? done() : sock.once('drain', done)));
    // The gateway let go of the connection with the answer unread (a reset).
    let reset = false;
    const onError = () => {
      reset = true;
    };
    sock.on('error', onError);
    res.on('close', () => {
      sock.off('error', onError);
      o.open--;
      if (reset) o.aborted++;
    });
    req.resume();
    req.on('end', () => {
      if (req.url?.includes('/large')) return void res.end(BIG);
      if (req.url?.includes('/twelve')) return void res.end(BIG.subarray(0, 12 * MIB));
      if (req.url?.includes('/half')) return void res.end(BIG.subarray(0, MIB / 2));
      res.end('ok');
    });
  });
  return o;
}

const routeTo = (url: string) => ({
  name: 'b',
  prefix: '/b',
  auth: 'none',
  // Generous for loaded shared cores; a request left waiting for a held connection gets 503 after it.
  queue_timeout_ms: 2000,
  origins: { production: url },
});

/** Issue #34, item 12: answers to slow clients are read from the origin at its speed (nginx's proxy_buffering). */
describe('answers within the response buffer', () => {
  let o: Awaited<ReturnType<typeof countingOrigin>>;
  let g: TestGateway;
  beforeAll(async () => {
    o = await countingOrigin();
    // A response buffer larger than what loopback's kernel buffers absorb (about 7 MiB both ways).
    g = await startGateway({
      server: { upstream_connections: 4, buffer_response_body_bytes: 16 * MIB },
      routes: [routeTo(o.server.url)],
    });
  });
  afterAll(async () => {
    await g.cleanup();
    await o.server.close();
  });

  it("are read whole whatever the client: four paused clients hold none of the origin's four connections", async () => {
    const port = Number(new URL(g.url).port);
    const paused = Array.from({ length: 4 }, () => pausedGet(port, '/b/twelve', '127.0.0.2'));
    let cut = 0;
    for (const p of paused) void p.closed.then(() => cut++);
    // The origin wrote every answer whole (more than loopback's buffers hold), so the gateway read them.
    await expect.poll(() => o.finished, { timeout: 8000 }).toBe(4);
    // Its connections are free again (a 503 would come after queue_timeout_ms).
    await expect.poll(() => getFrom(port, '/b/ok', '127.0.0.3'), { timeout: 6000, interval: 50 }).toBe(200);
    expect(await getFrom(port, '/b/ok', '127.0.0.2')).toBe(200);
    // While the paused clients still wait, unread, on their connections.
    expect(cut).toBe(0);
    for (const p of paused) p.s.destroy();
  });
});

/** Issue #34, item 12: larger answers and uploads stream with bounds per address and per origin; send_timeout. */
describe('slow readers and writers past the buffers do not starve an origin', () => {
  let o: Awaited<ReturnType<typeof countingOrigin>>;
  let g: TestGateway;
  let port: number;
  beforeAll(async () => {
    o = await countingOrigin();
    g = await startGateway({
      server: {
        upstream_connections: 4,
        max_streaming_downloads_per_client: 2,
        max_streaming_uploads_per_client: 2,
        buffer_request_body_bytes: 65_536,
        send_timeout_ms: 3000,
      },
      routes: [routeTo(o.server.url)],
    });
    port = Number(new URL(g.url).port);
  });
  afterAll(async () => {
    await g.cleanup();
    await o.server.close();
  });

  it('paused downloads from one address up to max_streaming_downloads_per_client hold no more: another address is served; the ones past it are cut', async () => {
    const paused = Array.from({ length: 4 }, () => pausedGet(port, '/b/large', '127.0.0.4'));
    // Past the bound (2 per address) the answers are cut off as they fall behind: the origin is let go of.
    await expect.poll(() => o.aborted, { timeout: 5000 }).toBe(2);
    expect(o.open).toBe(2);
    // A 503 would come after the route's queue_timeout_ms: this is served.
    expect(await getFrom(port, '/b/ok', '127.0.0.5')).toBe(200);
    for (const p of paused) p.s.destroy();
    await expect.poll(() => o.open, { timeout: 3000 }).toBe(0);
  });

  it('a client that reads nothing for send_timeout_ms is cut off, and its origin connection let go', async () => {
    const before = o.aborted;
    const t0 = performance.now();
    const p = pausedGet(port, '/b/large', '127.0.0.6');
    // The gateway cuts the client (which, never reading, cannot see it) and lets the origin go.
    await expect.poll(() => o.aborted - before, { timeout: 8000, interval: 20 }).toBe(1);
    const ms = performance.now() - t0;
    expect(ms).toBeGreaterThanOrEqual(2900);
    expect(ms).toBeLessThan(8000);
    // What the client reads now ends: its connection was closed.
    p.s.resume();
    await p.closed;
  });

  it('fuzz: any mix of slow readers and writers from a few addresses leaves a well-behaved client served (proxy and /v2)', async () => {
    /** What a slow client does, all on loopback, each never finishing by itself. */
    const kinds = {
      pausedLarge: '/b/large',
      pausedTwelve: '/b/twelve',
      pausedHalf: '/b/half',
      slowUpload: 'POST /b/up 1000000',
      slowBuffered: 'POST /b/up 60000',
      slowV2: 'POST /v2/api-keys 200',
      slowHeaders: 'GET /b/ok',
    } as const;
    const open = (kind: keyof typeof kinds, from: string): net.Socket => {
      const s = net.connect({ port, host: '127.0.0.1', localAddress: from });
      s.on('error', () => {});
      const what = kinds[kind];
      if (kind.startsWith('paused')) {
        s.write(`GET ${what} HTTP/1.1\r\nHost: x\r\n\r\n`);
        s.pause();
      } else if (kind === 'slowHeaders') {
        s.write('GET /b/ok HTTP/1.1\r\nHost: x\r\nX-Slow: ');
      } else {
        const [, path, length] = what.split(' ');
        const sent = Number(length) > 65_536 ? 'u'.repeat(70_000) : '{"la';
        s.write(
          `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${g.admin}\r\nContent-Length: ${length}\r\n\r\n${sent}`,
        );
      }
      return s;
    };
    const actor = fc.record({
      kind: fc.constantFrom(...(Object.keys(kinds) as (keyof typeof kinds)[])),
      from: fc.integer({ min: 40, max: 45 }),
      delayMs: fc.integer({ min: 0, max: 60 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(actor, { minLength: 1, maxLength: 8 }), async (actors) => {
        const socks: net.Socket[] = [];
        try {
          for (const a of actors) {
            socks.push(open(a.kind, `127.0.0.${a.from}`));
            if (a.delayMs > 0) await new Promise((r) => setTimeout(r, a.delayMs));
          }
          await new Promise((r) => setTimeout(r, 500));
          // A 503 would come after the route's queue_timeout_ms: both are served.
          expect(await getFrom(port, '/b/ok', '127.0.0.99')).toBe(200);
          // The /v2 path's handover, without a storage query (slow on loaded shared cores).
          const v2 = await fetch(`${g.url}/v2/openapi.json`, {
            headers: { authorization: `Bearer ${g.admin}` },
            signal: AbortSignal.timeout(10_000),
          });
          expect(v2.status).toBe(200);
        } finally {
          for (const s of socks) s.destroy();
          await expect.poll(() => o.open, { timeout: 5000 }).toBe(0);
        }
      }),
      { numRuns: 5 },
    );
  }, 150_000);

  it('stalled uploads from many addresses (each within its own bound) leave origin connections to another address', async () => {
    const stalled: net.Socket[] = [];
    for (let a = 10; a < 20; a++) {
      for (let i = 0; i < 2; i++) {
        const s = net.connect({ port, host: '127.0.0.1', localAddress: `127.0.0.${a}` });
        s.on('error', () => {});
        s.write(`POST /b/up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n${'u'.repeat(70_000)}`);
        stalled.push(s);
      }
    }
    await new Promise((r) => setTimeout(r, 300));
    // A 503 would come after the route's queue_timeout_ms: this is served.
    expect(await getFrom(port, '/b/ok', '127.0.0.30')).toBe(200);
    for (const s of stalled) s.destroy();
    await expect.poll(() => o.open, { timeout: 3000 }).toBe(0);
  });
});
