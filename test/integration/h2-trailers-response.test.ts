// Regression tests from a review of HTTP/2 trailers (2026-11-28).
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2connect, h2request } from '../helpers/h2.js';
import { F, type Frame, frame, hpack, RawH2, request, T } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange } from '../helpers/raw.js';

/** What each path of the origin answers: chunked unless it sets Content-Length. */
const ANSWERS: Record<string, (res: ServerResponse) => void> = {
  // Trailer fields with no `Trailer` header announcing them (RFC 9110 §6.5 lets a sender omit it).
  '/t/unannounced': (res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('part ');
    res.addTrailers({ 'x-checksum': 'sha-256=abc', 'grpc-status': '0' });
    res.end('two');
  },
  '/t/announced': (res) => {
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum' });
    res.write('part ');
    res.addTrailers({ 'x-checksum': 'sha-256=abc' });
    res.end('two');
  },
  // No body at all, only trailers after the last (empty) chunk.
  '/t/only-trailers': (res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.addTrailers({ 'x-checksum': 'none' });
    res.end();
  },
  '/t/chunked-no-trailers': (res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('part ');
    res.end('two');
  },
  '/t/sized': (res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '8' });
    res.end('part two');
  },
  // The same names in any case, repeated, and fields HTTP/2 never carries (RFC 9113 §8.2.2).
  '/t/mixed': (res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('x');
    res.addTrailers([
      ['X-Checksum', 'abc'],
      ['x-many', '1'],
      ['x-many', '2'],
      ['Keep-Alive', 'timeout=5'],
      ['Connection', 'close'],
    ]);
    res.end();
  },
  // Answered at once, the request's body unread (its client still sending it).
  '/t/early': (res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('early');
    res.addTrailers({ 'x-checksum': 'early' });
    res.end();
  },
  '/t/early-announced': (res) => {
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum' });
    res.write('early');
    res.addTrailers({ 'x-checksum': 'early' });
    res.end();
  },
  '/t/early-plain': (res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('early');
  },
  '/t/no-content': (res) => {
    res.writeHead(204);
    res.end();
  },
};

/**
 * An origin's trailer fields after a chunked answer reach an HTTP/2 client as they reach
 * an HTTP/1.1 one, announced by `Trailer` or not; answers that cannot carry trailers
 * (Content-Length, HEAD, 204) end as before, and a chunked answer without trailers ends
 * with END_STREAM, never a reset.
 */
describe('HTTP/2: response trailers the origin did not announce', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      if (req.url?.startsWith('/t/early')) return ANSWERS[req.url]?.(res);
      req.resume();
      req.on('end', () => (ANSWERS[req.url ?? ''] ?? ANSWERS['/t/sized'])?.(res));
    });
    t = await startGateway({
      server: { http2: 'h2c', buffer_request_body_bytes: 1024 },
      routes: [{ name: 't', prefix: '/t', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  /** A GET on its own h2c session. */
  const h2get = async (path: string, method = 'GET') => {
    const s = await h2connect(t.url);
    try {
      return await h2request(s, { ':path': path, ':method': method });
    } finally {
      s.close();
    }
  };

  /** The trailer section an HTTP/1.1 client is sent (lines after the last chunk), in order. */
  const h1Trailers = async (path: string): Promise<string[]> => {
    const r = await rawExchange(port, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(r.text.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
    const last = r.text.lastIndexOf('\r\n0\r\n');
    return r.text
      .slice(last + 5)
      .split('\r\n')
      .filter((l) => l !== '');
  };

  it('premise: an HTTP/1.1 client through the same gateway gets unannounced trailers', async () => {
    expect(await h1Trailers('/t/unannounced')).toEqual(['x-checksum: sha-256=abc', 'grpc-status: 0']);
  });

  it('regression: an HTTP/2 client gets trailer fields the origin sent without a Trailer header', async () => {
    const r = await h2get('/t/unannounced');
    expect(r.status).toBe(200);
    expect(r.text).toBe('part two');
    expect(r.headers.trailer).toBeUndefined();
    expect(r.trailers['x-checksum']).toBe('sha-256=abc');
    expect(r.trailers['grpc-status']).toBe('0');
  });

  it('announced trailers still pass, and trailers after an empty body too', async () => {
    const a = await h2get('/t/announced');
    expect(a.text).toBe('part two');
    expect(a.trailers['x-checksum']).toBe('sha-256=abc');
    const e = await h2get('/t/only-trailers');
    expect(e.status).toBe(200);
    expect(e.text).toBe('');
    expect(e.trailers['x-checksum']).toBe('none');
  });

  it('regression: the same fields as HTTP/1.1 passes, less connection-specific ones; repeated ones all', async () => {
    // HTTP/1.1 passes the origin's trailer section less hop-by-hop fields (trailers.ts).
    expect(await h1Trailers('/t/mixed')).toEqual(['X-Checksum: abc', 'x-many: 1', 'x-many: 2']);
    const r = await h2get('/t/mixed');
    expect(r.status).toBe(200);
    expect(Object.fromEntries(Object.entries(r.trailers))).toEqual({ 'x-checksum': 'abc', 'x-many': '1, 2' });
  });

  it.each(['/t/early', '/t/early-announced'])(
    'an answer with trailers made before the upload has all come (%s): the client gets it whole, trailers and all, before its upload is stopped',
    async (path) => {
      const s = await h2connect(t.url);
      s.on('error', () => {});
      try {
        const got = await new Promise<{
          status: number;
          text: string;
          trailers: Record<string, unknown>;
          ended: boolean;
        }>((resolve) => {
          // Past buffer_request_body_bytes, so it streams to the origin, and never ended by the client.
          const r = s.request({ ':method': 'POST', ':path': path });
          const out = { status: 0, text: '', trailers: {} as Record<string, unknown>, ended: false };
          r.on('response', (h) => {
            out.status = Number(h[':status']);
          });
          r.on('trailers', (tr) => {
            out.trailers = { ...tr };
          });
          r.on('data', (c: Buffer) => {
            out.text += c.toString();
          });
          r.on('end', () => {
            out.ended = true;
          });
          r.on('error', () => {});
          r.on('close', () => resolve(out));
          r.write(Buffer.alloc(4096, 0x61));
        });
        expect(got).toMatchObject({ status: 200, text: 'early', ended: true });
        expect(got.trailers['x-checksum']).toBe('early');
      } finally {
        s.destroy();
      }
    },
  );

  it('the wake of a chunked answer with trailers is recorded as answered (200), not a 499', async () => {
    await h2get('/t/unannounced?wake=recorded');
    await flushed(t.gw);
    const w = await fetch(`${t.url}/v2/wakes?path=/t/unannounced`, { headers: { authorization: `Bearer ${t.admin}` } });
    const body = (await w.json()) as { data: { status: number; protocol?: string }[] };
    expect(body.data.length).toBeGreaterThan(0);
    for (const wake of body.data) expect(wake.status).toBe(200);
  });

  /**
   * The frames the gateway sends on stream 1 for one request on a raw connection, once it
   * ended or reset. `upload`: a POST's first bytes, the request left unended.
   */
  const framesOf = async (path: string, method = 'GET', upload?: Buffer): Promise<Frame[]> => {
    const raw = await RawH2.connect(port);
    try {
      if (upload === undefined)
        raw.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, hpack(request(path, method))));
      else {
        raw.write(frame(T.HEADERS, F.END_HEADERS, 1, hpack(request(path, 'POST'))));
        raw.write(frame(T.DATA, 0, 1, upload));
      }
      const deadline = Date.now() + 3000;
      const done = (f: Frame) =>
        f.stream === 1 &&
        ((f.flags & F.END_STREAM && (f.type === T.DATA || f.type === T.HEADERS)) || f.type === T.RST_STREAM);
      while (!raw.frames.some(done) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      // Anything sent after the end (a reset after END_STREAM) is seen too.
      await new Promise((r) => setTimeout(r, 100));
      return raw.frames.filter((f) => f.stream === 1);
    } finally {
      raw.destroy();
    }
  };
  /** A frame as `type[+END_STREAM]`, RST_STREAM as `RST_STREAM`. */
  const said = (f: Frame) => {
    const name =
      f.type === T.DATA ? 'DATA' : f.type === T.HEADERS ? 'HEADERS' : f.type === T.RST_STREAM ? 'RST_STREAM' : f.type;
    return f.type !== T.RST_STREAM && f.flags & F.END_STREAM ? `${name}+END_STREAM` : String(name);
  };

  /**
   * The stream's frames up to the one that ends it (END_STREAM, or a reset before it), and
   * what came after: a reset with NO_ERROR at most (Node closes a stream whose request it
   * never read so, once the answer is sent).
   */
  const ended = (frames: Frame[]): string[] => {
    const end = frames.findIndex((f) => f.type === T.RST_STREAM || f.flags & F.END_STREAM);
    expect(end, 'the stream never ended').not.toBe(-1);
    for (const f of frames.slice(end + 1)) expect([f.type, f.payload.readUInt32BE(0)]).toEqual([T.RST_STREAM, 0]);
    return frames.slice(0, end + 1).map(said);
  };

  it('a chunked answer with no trailers ends with END_STREAM on a DATA frame, no reset before it', async () => {
    const frames = ended(await framesOf('/t/chunked-no-trailers'));
    expect(frames[0]).toBe('HEADERS');
    expect(frames.at(-1)).toBe('DATA+END_STREAM');
  });

  it('regression: unannounced trailers go as a last HEADERS frame with END_STREAM (RFC 9113 §8.1)', async () => {
    const frames = ended(await framesOf('/t/unannounced'));
    expect(frames[0]).toBe('HEADERS');
    expect(frames.at(-1)).toBe('HEADERS+END_STREAM');
  });

  it('an answer made before the upload has all come ends with END_STREAM (its trailers, or an empty DATA frame), then RST_STREAM NO_ERROR stops the upload', async () => {
    const upload = Buffer.alloc(4096, 0x61);
    const withTrailers = await framesOf('/t/early', 'POST', upload);
    expect(withTrailers.map(said).slice(-2)).toEqual(['HEADERS+END_STREAM', 'RST_STREAM']);
    expect(withTrailers.at(-1)?.payload.readUInt32BE(0)).toBe(0);
    const without = await framesOf('/t/early-plain', 'POST', upload);
    expect(without.map(said).slice(-2)).toEqual(['DATA+END_STREAM', 'RST_STREAM']);
    expect(without.at(-1)?.payload.readUInt32BE(0)).toBe(0);
  });

  it('answers that cannot carry trailers cost nothing more: Content-Length ends on its last DATA, HEAD and 204 on HEADERS', async () => {
    // The last bytes and END_STREAM in one frame: no empty DATA frame after them.
    const sized = await framesOf('/t/sized');
    expect(ended(sized)).toEqual(['HEADERS', 'DATA+END_STREAM']);
    expect(sized[1]?.payload.toString()).toBe('part two');
    expect(ended(await framesOf('/t/unannounced', 'HEAD'))).toEqual(['HEADERS+END_STREAM']);
    expect(ended(await framesOf('/t/no-content'))).toEqual(['HEADERS+END_STREAM']);
  });
});
