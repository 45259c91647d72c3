import { randomBytes } from 'node:crypto';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headerListSize } from '../../src/h2/guards.js';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2once } from '../helpers/h2.js';
import { F, frame, hpack, RawH2, request, rstStream, settings, T, windowUpdate } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const C = http2.constants;

/**
 * Issue #37: hostile frames through the real listener (raw frames over a net socket).
 * Each case ends with the gateway serving other clients (HTTP/2 and HTTP/1.1); the
 * process never crashes, and its memory stays bounded across all of them.
 */
describe('HTTP/2 frame fuzzing through the listener', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const BIG = 4 * 1024 * 1024;
  let rss0 = 0;
  /** What reached the origin of each /open/seen request: its header and trailer fields. */
  const seen: string[] = [];

  /** One stream of `fields` on a raw connection, ended with its HEADERS: the body of its answer (3 s at most). */
  const answerOf = async (fields: [string, string][]) => {
    const c = await RawH2.connect(port);
    c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, hpack(fields)));
    const until = Date.now() + 3000;
    while (Date.now() < until && !c.frames.some((f) => f.stream === 1 && (f.flags & F.END_STREAM) !== 0))
      await new Promise((r) => setTimeout(r, 20));
    c.destroy();
    const data = c.frames.filter((f) => f.stream === 1 && f.type === T.DATA).map((f) => f.payload);
    return Buffer.concat(data).toString();
  };
  const othersServed = async () => {
    const r = await h2once(t.url, { ':path': '/open/other' });
    expect(r.status).toBe(200);
    expect((await fetch(`${t.url}/open/h1`)).status).toBe(200);
  };

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      if (req.url?.startsWith('/open/seen')) {
        req.resume();
        req.on('end', () => {
          seen.push([...req.rawHeaders, ...req.rawTrailers].join('\n'));
          res.end('ok');
        });
        return;
      }
      req.resume();
      if (req.url === '/open/big') return void res.end(Buffer.alloc(BIG, 1));
      if (req.url === '/open/small') return void res.end(Buffer.alloc(10_000, 1));
      res.end('ok');
    });
    t = await startGateway({
      server: {
        http2: 'h2c',
        send_timeout_ms: 500,
        keep_alive_timeout_ms: 1000,
        headers_timeout_ms: 500,
        request_timeout_ms: 1000,
        buffer_response_body_bytes: 65_536,
        http2_limits: { max_concurrent_streams: 100, max_header_list_bytes: 65_536, max_resets_per_10s: 200 },
      },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
    rss0 = process.memoryUsage().rss;
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('bad SETTINGS (a length not a multiple of 6, ENABLE_PUSH 2, a window past 2^31-1) end that session only', async () => {
    const cases = [
      frame(T.SETTINGS, 0, 0, Buffer.alloc(7)),
      settings([[0x2, 2]]),
      settings([[0x4, 0x80000000]]),
      frame(T.SETTINGS, 0, 3, Buffer.alloc(0)),
    ];
    for (const bad of cases) {
      const c = await RawH2.connect(port);
      c.write(bad);
      // GOAWAY with an error at once; the connection closed within keep_alive_timeout_ms.
      expect(await c.closedWithin(3000)).toBe(true);
      expect(c.goawayCode()).not.toBe(C.NGHTTP2_NO_ERROR);
      expect(c.goawayCode()).not.toBeNull();
    }
    await othersServed();
  });

  it('a SETTINGS and PING flood never read by its client is cut off, bounded', async () => {
    const c = await RawH2.connect(port);
    c.socket.pause();
    const burst = Buffer.concat(
      Array.from({ length: 2000 }, (_, i) => (i % 2 ? settings([[0x3, 100]]) : frame(T.PING, 0, 0, Buffer.alloc(8)))),
    );
    for (let i = 0; i < 20 && !c.closed; i++) {
      c.write(burst);
      await new Promise((r) => setTimeout(r, 5));
    }
    c.socket.resume();
    expect(await c.closedWithin(5000)).toBe(true);
    await othersServed();
  });

  it('a huge HEADERS + CONTINUATION flood is refused before it is held', async () => {
    const c = await RawH2.connect(port);
    const block = hpack([...request('/open/x'), ['x-pad', 'a'.repeat(4000)]]);
    c.write(frame(T.HEADERS, F.END_STREAM, 1, block));
    const cont = frame(T.CONTINUATION, 0, 1, hpack([['x-more', 'b'.repeat(8000)]]));
    // 8 MB of CONTINUATION, never END_HEADERS: far past max_header_list_bytes.
    for (let i = 0; i < 1000 && !c.closed; i++) {
      c.write(cont);
      if (i % 50 === 0) await new Promise((r) => setTimeout(r, 1));
    }
    expect(await c.closedWithin(5000)).toBe(true);
    expect(c.frames.some((f) => f.type === T.HEADERS && f.stream === 1)).toBe(false);
    await othersServed();
  });

  it("a header list past max_header_list_bytes (never acknowledged: Node's own bound does not hold yet) gets the gateway's 431, never the origin", async () => {
    seen.length = 0;
    // RawH2 never sends the SETTINGS ACK. 80 kB of fields: past the limit (65,536), within what Node takes before the ACK.
    const c = await RawH2.connect(port);
    const fields = request('/open/seen-big');
    for (let i = 0; i < 10; i++) fields.push([`x-pad-${i}`, 'p'.repeat(8000)]);
    const block = hpack(fields);
    c.write(frame(T.HEADERS, F.END_STREAM, 1, block.subarray(0, 16_000)));
    for (let i = 16_000; i < block.length; i += 16_000) {
      const last = i + 16_000 >= block.length;
      c.write(frame(T.CONTINUATION, last ? F.END_HEADERS : 0, 1, block.subarray(i, i + 16_000)));
    }
    const until = Date.now() + 3000;
    while (Date.now() < until && !c.frames.some((f) => f.stream === 1 && (f.flags & F.END_STREAM) !== 0))
      await new Promise((r) => setTimeout(r, 20));
    c.destroy();
    const data = c.frames.filter((f) => f.stream === 1 && f.type === T.DATA).map((f) => f.payload);
    const body = JSON.parse(Buffer.concat(data).toString());
    expect(body.error.type).toBe('request_header_fields_too_large');
    expect(body.error.message).toContain('server.http2_limits.max_header_list_bytes (65536 bytes)');
    expect(body.error.wake_id).toBeNull();
    expect(seen).toEqual([]);
    await othersServed();
  });

  it('window abuse: a WINDOW_UPDATE past 2^31-1 and a zero increment end the session', async () => {
    for (const bad of [Buffer.concat([windowUpdate(0, 0x7fffffff), windowUpdate(0, 0x7fffffff)]), windowUpdate(0, 0)]) {
      const c = await RawH2.connect(port);
      c.write(bad);
      expect(await c.closedWithin(3000)).toBe(true);
      // Node reports nghttp2's flow-control and protocol errors as INTERNAL_ERROR in its GOAWAY.
      expect(c.goawayCode()).not.toBe(C.NGHTTP2_NO_ERROR);
      expect(c.goawayCode()).not.toBeNull();
    }
    await othersServed();
  });

  it('a zero window that never opens holds the answer only until send_timeout_ms', async () => {
    const c = await RawH2.connect(port, false);
    c.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), settings([[0x4, 0]])]));
    c.write(frame(T.HEADERS, F.END_STREAM | F.END_HEADERS, 1, hpack(request('/open/big'))));
    // Others are served while it waits; its stream is cut once it has read nothing for 500 ms.
    await othersServed();
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && !c.frames.some((f) => f.type === T.RST_STREAM && f.stream === 1) && !c.closed)
      await new Promise((r) => setTimeout(r, 50));
    expect(c.frames.some((f) => f.type === T.RST_STREAM && f.stream === 1) || c.closed).toBe(true);
    expect(c.frames.filter((f) => f.type === T.DATA).length).toBe(0);
    c.destroy();
  });

  it('small answers behind a window that never opens are cut at send_timeout_ms too, and the session then ends', async () => {
    const c = await RawH2.connect(port, false);
    c.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), settings([[0x4, 0]])]));
    const ids: number[] = [];
    // 10 kB answers (each within the stream's write buffer) and the gateway's own error answers.
    for (let id = 1; id < 100; id += 2) {
      ids.push(id);
      const path = id % 4 === 1 ? '/open/small' : '/none';
      c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, id, hpack(request(path))));
    }
    const t0 = Date.now();
    const reset = () => new Set(c.frames.filter((f) => f.type === T.RST_STREAM).map((f) => f.stream));
    while (Date.now() - t0 < 4000 && reset().size < ids.length && !c.closed)
      await new Promise((r) => setTimeout(r, 50));
    expect([...reset()].sort((a, b) => a - b)).toEqual(ids);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(450);
    expect(c.frames.some((f) => f.type === T.DATA)).toBe(false);
    // No stream left open: the session is idle, and closed at keep_alive_timeout_ms.
    expect(await c.closedWithin(3000)).toBe(true);
    await othersServed();
  });

  for (const [code, name] of [
    [C.NGHTTP2_CANCEL, 'CANCEL'],
    [C.NGHTTP2_NO_ERROR, 'NO_ERROR'],
  ] as const) {
    it(`rapid reset with RST_STREAM ${name}: past max_resets_per_10s the session gets GOAWAY ENHANCE_YOUR_CALM, counted; others are served`, async () => {
      const c = await RawH2.connect(port);
      let id = 1;
      for (let round = 0; round < 10 && !c.closed; round++) {
        const burst: Buffer[] = [];
        for (let i = 0; i < 50; i++, id += 2) {
          burst.push(frame(T.HEADERS, F.END_STREAM | F.END_HEADERS, id, hpack(request('/open/r'))));
          burst.push(rstStream(id, code));
        }
        c.write(Buffer.concat(burst));
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(await c.closedWithin(5000)).toBe(true);
      expect(c.goawayCode()).toBe(C.NGHTTP2_ENHANCE_YOUR_CALM);
      await othersServed();
      const metrics = await (await fetch(`${t.opsUrl}/metrics`)).text();
      const n = /wakegate_h2_goaway_total\{reason="rapid_reset"\} (\d+)/.exec(metrics);
      expect(Number(n?.[1])).toBeGreaterThanOrEqual(1);
    });
  }

  it('garbage after the preface ends that session; a near-preface is HTTP/1.1 and gets 400', async () => {
    const c = await RawH2.connect(port);
    c.write(
      Buffer.from('\x00\x00\x05\xff\xff\x00\x00\x00\x01hello garbage that is no frame at all'.repeat(20), 'latin1'),
    );
    expect(await c.closedWithin(3000)).toBe(true);
    expect(c.goawayCode()).toBe(C.NGHTTP2_FRAME_SIZE_ERROR);
    const near = await RawH2.connect(port, false);
    const got: Buffer[] = [];
    near.socket.on('data', (b: Buffer) => got.push(b));
    near.write(Buffer.from('PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n', 'latin1'));
    expect(await near.closedWithin(2000)).toBe(true);
    expect(Buffer.concat(got).toString('latin1')).toMatch(/^HTTP\/1\.1 400/);
    await othersServed();
  });

  it('a request body that never ends is reset at request_timeout_ms, per stream', async () => {
    const c = await RawH2.connect(port);
    const t0 = Date.now();
    // HEADERS without END_STREAM, then a little body, then nothing.
    c.write(frame(T.HEADERS, F.END_HEADERS, 1, hpack(request('/open/upload', 'POST'))));
    c.write(frame(T.DATA, 0, 1, Buffer.from('part')));
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && !c.frames.some((f) => f.type === T.RST_STREAM && f.stream === 1))
      await new Promise((r) => setTimeout(r, 50));
    const rst = c.frames.find((f) => f.type === T.RST_STREAM && f.stream === 1);
    expect(rst?.payload.readUInt32BE(0)).toBe(C.NGHTTP2_CANCEL);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    // The session itself lives on: a new stream on it is served.
    c.write(frame(T.HEADERS, F.END_STREAM | F.END_HEADERS, 3, hpack(request('/open/after'))));
    const until = Date.now() + 3000;
    while (Date.now() < until && !c.frames.some((f) => f.type === T.HEADERS && f.stream === 3))
      await new Promise((r) => setTimeout(r, 20));
    expect(c.frames.some((f) => f.type === T.HEADERS && f.stream === 3)).toBe(true);
    c.destroy();
  });

  it('a client opening streams past max_concurrent_streams loses its session; at most that many were ever open', async () => {
    const c = await RawH2.connect(port);
    await new Promise((r) => setTimeout(r, 50));
    // Our SETTINGS acknowledged: the limit is in force (nghttp2 then treats going past it as a connection error).
    c.write(frame(T.SETTINGS, F.ACK, 0));
    // 120 uploads that never end.
    const opens: Buffer[] = [];
    for (let i = 0, id = 1; i < 120; i++, id += 2)
      opens.push(frame(T.HEADERS, F.END_HEADERS, id, hpack(request('/open/u', 'POST'))));
    c.write(Buffer.concat(opens));
    expect(await c.closedWithin(3000)).toBe(true);
    expect(c.goawayCode()).not.toBe(C.NGHTTP2_NO_ERROR);
    const reset = c.frames.filter((f) => f.type === T.RST_STREAM).map((f) => f.stream);
    // At most 100 streams (ids 1..199) were ever open, reset with the session; none was answered.
    expect(Math.max(...reset)).toBeLessThanOrEqual(199);
    expect(reset.length).toBeGreaterThan(90);
    expect(c.frames.some((f) => f.type === T.HEADERS)).toBe(false);
    await othersServed();
  });

  it('a gateway key in :authority, Host, split Cookie fields or trailers never reaches the origin', async () => {
    const key = `svc_live_${'k'.repeat(40)}`;
    const cases: { fields: [string, string][]; trailers?: [string, string][] }[] = [
      {
        fields: [
          [':method', 'GET'],
          [':scheme', 'http'],
          [':authority', key],
          [':path', '/open/seen'],
        ],
      },
      {
        fields: [
          [':method', 'GET'],
          [':scheme', 'http'],
          [':authority', `${key}:443`],
          [':path', '/open/seen'],
        ],
      },
      { fields: [...request('/open/seen'), ['host', key]] },
      { fields: [...request('/open/seen'), ['cookie', 'a=1'], ['cookie', `k=${key}`]] },
      { fields: request('/open/seen', 'POST'), trailers: [['x-sum', key]] },
    ];
    for (const one of cases) {
      seen.length = 0;
      const c = await RawH2.connect(port);
      const ends = one.trailers === undefined ? F.END_STREAM : 0;
      c.write(frame(T.HEADERS, F.END_HEADERS | ends, 1, hpack(one.fields)));
      if (one.trailers !== undefined) {
        c.write(frame(T.DATA, 0, 1, Buffer.from('body')));
        c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, hpack(one.trailers)));
      }
      const until = Date.now() + 3000;
      while (
        Date.now() < until &&
        !c.frames.some((f) => (f.stream === 1 && (f.flags & F.END_STREAM) !== 0) || f.type === T.RST_STREAM)
      )
        await new Promise((r) => setTimeout(r, 20));
      c.destroy();
      const label = JSON.stringify(one);
      expect(
        c.frames.some((f) => f.stream === 1 && f.type === T.HEADERS),
        label,
      ).toBe(true);
      for (const got of seen) expect(got, label).not.toMatch(/svc_(live|test)_|k{20}/);
    }
    await othersServed();
  });

  it(':method is one HTTP/1.1 takes: any other token (of any length) is a malformed request, never forwarded nor stored', async () => {
    const answer = (method: string) => answerOf(request('/open/seen-method', method));
    const before = (await t.gw.wakes.list({ environment: 'production', pathPattern: '^/open/seen-method$' }, 100, null))
      .rows.length;
    for (const bad of ['X'.repeat(15_000), 'FOO', 'get', 'Post', 'BREW']) {
      seen.length = 0;
      const body = await answer(bad);
      expect(JSON.parse(body), bad.slice(0, 20)).toEqual({
        error: { type: 'invalid_request', message: 'malformed request', param: null, retry_after: null, wake_id: null },
      });
      expect(seen, bad.slice(0, 20)).toHaveLength(0);
    }
    for (const good of ['GET', 'PATCH', 'PURGE', 'PROPFIND']) {
      seen.length = 0;
      expect(await answer(good), good).toBe('ok');
      expect(seen, good).toHaveLength(1);
    }
    await flushed(t.gw);
    const rows = (await t.gw.wakes.list({ environment: 'production', pathPattern: '^/open/seen-method$' }, 100, null))
      .rows;
    expect(rows.length - before).toBe(4);
    expect(rows.map((w) => w.method).sort()).toEqual(['GET', 'PATCH', 'PROPFIND', 'PURGE']);
    await othersServed();
  });

  it('a Host that names another authority than :authority is a malformed request (RFC 9113 §8.3.1), never forwarded', async () => {
    const answer = answerOf;
    const base = request('/open/seen-host');
    for (const host of ['admin.internal', 'localhost:8443', 'localhost.', 'evil.test']) {
      seen.length = 0;
      expect(JSON.parse(await answer([...base, ['host', host]])), host).toMatchObject({
        error: { type: 'invalid_request', message: 'malformed request' },
      });
      expect(seen, host).toHaveLength(0);
    }
    // The same authority (names are case-insensitive), or only one of the two: served.
    for (const fields of [
      [...base, ['host', 'localhost']],
      [...base, ['host', 'LocalHost']],
      base,
      base.filter(([n]) => n !== ':authority').concat([['host', 'elsewhere.test']]),
    ] as [string, string][][]) {
      seen.length = 0;
      expect(await answer(fields), JSON.stringify(fields)).toBe('ok');
      expect(seen).toHaveLength(1);
    }
    await othersServed();
  });

  it('malformed requests (pseudo-headers, forbidden fields, CR/LF/NUL, a length the DATA belies) never reach the origin', async () => {
    const req = (path: string, method = 'GET') => request(path, method);
    const refused: { name: string; fields: [string, string][]; body?: Buffer; trailers?: [string, string][] }[] = [
      { name: ':path without /', fields: req('open/seen') },
      { name: 'absolute :path', fields: req('http://evil.example/open/seen') },
      { name: ':path with a space', fields: req('/open/seen x HTTP/1.1') },
      {
        name: 'no :scheme',
        fields: [
          [':method', 'GET'],
          [':authority', 'a'],
          [':path', '/open/seen'],
        ],
      },
      {
        name: 'no :authority',
        fields: [
          [':method', 'GET'],
          [':scheme', 'http'],
          [':path', '/open/seen'],
        ],
      },
      {
        name: ':authority with CR LF',
        fields: [
          [':method', 'GET'],
          [':scheme', 'http'],
          [':authority', 'a\r\nx: 1'],
          [':path', '/open/seen'],
        ],
      },
      { name: 'extended CONNECT', fields: [...req('/open/seen', 'CONNECT'), [':protocol', 'websocket']] },
      { name: 'upper-case name', fields: [...req('/open/seen'), ['X-Up', '1']] },
      { name: 'connection', fields: [...req('/open/seen'), ['connection', 'close']] },
      {
        name: 'transfer-encoding',
        fields: [...req('/open/seen', 'POST'), ['transfer-encoding', 'chunked']],
        body: Buffer.from('0\r\n\r\n'),
      },
      { name: 'upgrade', fields: [...req('/open/seen'), ['upgrade', 'websocket']] },
      { name: 'te: gzip', fields: [...req('/open/seen'), ['te', 'gzip']] },
      {
        name: 'content-length past DATA',
        fields: [...req('/open/seen', 'POST'), ['content-length', '5']],
        body: Buffer.from('0123456789'),
      },
      {
        name: 'content-length short of DATA',
        fields: [...req('/open/seen', 'POST'), ['content-length', '50']],
        body: Buffer.from('0123456789'),
      },
      {
        name: 'pseudo-header in trailers',
        fields: req('/open/seen', 'POST'),
        body: Buffer.from('b'),
        trailers: [[':path', '/x']],
      },
    ];
    for (const one of refused) {
      seen.length = 0;
      const c = await RawH2.connect(port);
      const ends = one.body === undefined ? F.END_STREAM : 0;
      c.write(frame(T.HEADERS, F.END_HEADERS | ends, 1, hpack(one.fields)));
      if (one.body !== undefined) c.write(frame(T.DATA, one.trailers ? 0 : F.END_STREAM, 1, one.body));
      if (one.trailers !== undefined) c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, hpack(one.trailers)));
      const until = Date.now() + 3000;
      while (Date.now() < until && !c.frames.some((f) => f.stream === 1 && f.type === T.RST_STREAM) && !c.closed)
        await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 100));
      c.destroy();
      expect(c.frames.some((f) => f.stream === 1 && f.type === T.RST_STREAM) || c.closed, one.name).toBe(true);
      expect(
        c.frames.some((f) => f.stream === 1 && f.type === T.DATA),
        one.name,
      ).toBe(false);
      expect(seen, one.name).toHaveLength(0);
    }
    // Values Node drops as invalid (CR, LF, NUL, leading space): the request goes on without them.
    seen.length = 0;
    const bad: [string, string][] = [
      ['x-crlf', 'a\r\nInjected: 1'],
      ['x-lf', 'a\nInjected: 1'],
      ['x-nul', 'a\0b'],
      ['x-lead', ' a'],
    ];
    const c = await RawH2.connect(port);
    c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, hpack([...req('/open/seen'), ...bad])));
    const until = Date.now() + 3000;
    while (Date.now() < until && seen.length === 0) await new Promise((r) => setTimeout(r, 20));
    c.destroy();
    expect(seen).toHaveLength(1);
    expect(seen[0]).not.toMatch(/Injected|x-crlf|x-lf|x-nul|\0/i);
    await othersServed();
  });

  it('a gateway key in a body under repeated Content-Encoding fields is found as the origin would decode it, buffered or streamed', async () => {
    const key = `svc_live_${'q'.repeat(40)}`;
    const json = Buffer.from(JSON.stringify({ k: key }));
    // Past the 1 MiB request buffer once compressed (random bytes do not compress): streamed, scanned as it goes.
    const big = Buffer.from(JSON.stringify({ k: key, pad: randomBytes(1_200_000).toString('base64') }));
    const cases: [string, string[], Buffer][] = [
      ['identity, gzip', ['identity', 'gzip'], gzipSync(json)],
      ['gzip, gzip', ['gzip', 'gzip'], gzipSync(gzipSync(json))],
      ['identity, deflate', ['identity', 'deflate'], deflateSync(json)],
      ['streamed identity, gzip', ['identity', 'gzip'], gzipSync(big)],
    ];
    for (const [name, codings, body] of cases) {
      seen.length = 0;
      const c = await RawH2.connect(port);
      const fields: [string, string][] = [
        ...request('/open/seen-coding', 'POST'),
        ['content-type', 'application/json'],
        ...codings.map((v): [string, string] => ['content-encoding', v]),
        ['content-length', String(body.length)],
      ];
      c.write(frame(T.HEADERS, F.END_HEADERS, 1, hpack(fields)));
      // Within the windows the gateway opens (65,535 bytes to start with, then its WINDOW_UPDATEs).
      const opened = (stream: number) =>
        c.frames
          .filter((f) => f.type === T.WINDOW_UPDATE && f.stream === stream)
          .reduce((n, f) => n + f.payload.readUInt32BE(0), 65_535);
      for (let i = 0; i < body.length && !c.closed; i += 16_384) {
        const n = Math.min(16_384, body.length - i);
        const until = Date.now() + 5000;
        while (Date.now() < until && (i + n > opened(1) || i + n > opened(0)) && !c.closed)
          await new Promise((r) => setTimeout(r, 5));
        c.write(frame(T.DATA, i + n >= body.length ? F.END_STREAM : 0, 1, body.subarray(i, i + n)));
      }
      const until = Date.now() + 5000;
      while (
        Date.now() < until &&
        !c.frames.some((f) => f.stream === 1 && (f.type === T.RST_STREAM || (f.flags & F.END_STREAM) !== 0))
      )
        await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 100));
      c.destroy();
      const answer = Buffer.concat(
        c.frames.filter((f) => f.stream === 1 && f.type === T.DATA).map((f) => f.payload),
      ).toString();
      expect(seen, name).toHaveLength(0);
      expect(answer, name).toContain('gateway key');
    }
    await othersServed();
  });

  it('memory stays bounded through all of it', () => {
    expect(process.memoryUsage().rss - rss0).toBeLessThan(256 * 1024 * 1024);
  });
});

/**
 * What a stream holds of the proxy's budgets (buffered body bytes, streaming places per
 * address, origin slots, held answer bytes) goes back whichever way it ends: reset by
 * its client while its body is buffered, streamed, queued for a slot or its answer is
 * paused, or with its whole session cut.
 */
describe('HTTP/2 streams ended mid-forward give back every budget', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const release: (() => void)[] = [];
  /** Held requests the gateway gave up on (its client went away). */
  const aborted: string[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      if (req.url === '/open/big') return void res.end(Buffer.alloc(1024 * 1024, 1));
      // Held until the test lets go (or the gateway gives up on it: counted).
      release.push(() => res.end('late'));
      res.on('close', () => {
        if (!res.writableFinished) aborted.push(req.url ?? '');
      });
    });
    t = await startGateway({
      server: {
        http2: 'h2c',
        buffer_request_body_bytes: 1024,
        buffer_response_body_bytes: 16_384,
        upstream_connections: 4,
        send_timeout_ms: 30_000,
        request_timeout_ms: 30_000,
        http2_limits: { max_concurrent_streams: 100, max_header_list_bytes: 65_536, max_resets_per_10s: 1000 },
      },
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', queue_timeout_ms: 30_000, origins: { production: origin.url } },
      ],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    for (const r of release.splice(0)) r();
    await t.cleanup();
    await origin.close();
  });

  /** The proxy's counters, read from the edge (threads: 1). */
  const budgets = () => {
    // biome-ignore lint/suspicious/noExplicitAny: reads the proxy's private counters
    const p = t.gw.edge?.proxy as any;
    const slots = [...p.upstreams.slots.values()] as { active: number; streams: number; waiting: unknown[] }[];
    return {
      buffered: p.buffered as number,
      streamingUploads: p.streaming.size as number,
      held: p.downloads.held as number,
      streamingDownloads: p.downloads.streaming.size as number,
      active: slots.reduce((n, s) => n + s.active, 0),
      streams: slots.reduce((n, s) => n + s.streams, 0),
      waiting: slots.reduce((n, s) => n + s.waiting.length, 0),
    };
  };
  const ZERO = { buffered: 0, streamingUploads: 0, held: 0, streamingDownloads: 0, active: 0, streams: 0, waiting: 0 };
  const settled = async () => {
    const until = Date.now() + 5000;
    while (Date.now() < until && JSON.stringify(budgets()) !== JSON.stringify(ZERO))
      await new Promise((r) => setTimeout(r, 25));
    return budgets();
  };
  const post = (path: string, length: number): [string, string][] => [
    ...request(path, 'POST'),
    ['content-length', String(length)],
  ];
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  /** Opens streams in every phase on one session (its answers never read: window 0), then ends them `how`. */
  const scenario = async (how: 'reset' | 'cut') => {
    const c = await RawH2.connect(port, false);
    c.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), settings([[0x4, 0]])]));
    // 1: an upload past the buffer, streaming (a streaming place, an origin slot).
    c.write(frame(T.HEADERS, F.END_HEADERS, 1, hpack(post('/open/up', 100_000))));
    c.write(frame(T.DATA, 0, 1, Buffer.alloc(4096, 0x61)));
    // 3: a body still being buffered.
    c.write(frame(T.HEADERS, F.END_HEADERS, 3, hpack(post('/open/buf', 1000))));
    c.write(frame(T.DATA, 0, 3, Buffer.alloc(500, 0x62)));
    // 5, 7, 9: requests the origin holds (slots), then some queued for a slot.
    for (let id = 5; id <= 15; id += 2)
      c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, id, hpack(request('/open/hold'))));
    // 17: an answer larger than the buffer the client never reads (held bytes, then paused).
    c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 17, hpack(request('/open/big'))));
    await pause(400);
    const during = budgets();
    if (how === 'reset') {
      for (let id = 1; id <= 17; id += 2) c.write(rstStream(id, C.NGHTTP2_CANCEL));
      await pause(100);
      c.destroy();
    } else {
      c.destroy();
    }
    return during;
  };

  it('an h2c client that closes its connection ends its session at once, whatever its streams wait for', async () => {
    const c = await RawH2.connect(port, false);
    c.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), settings([[0x4, 0]])]));
    c.write(frame(T.HEADERS, F.END_HEADERS, 1, hpack(post('/open/buf', 1000))));
    c.write(frame(T.DATA, 0, 1, Buffer.alloc(500, 0x62)));
    await pause(300);
    expect(t.gw.edge?.h2?.sessions).toBe(1);
    expect(budgets().buffered).toBe(500);
    c.destroy();
    const until = Date.now() + 2000;
    while (Date.now() < until && t.gw.edge?.h2?.sessions !== 0) await pause(20);
    expect(t.gw.edge?.h2?.sessions).toBe(0);
    expect(await settled()).toEqual(ZERO);
  });

  it('a stream its client resets while the origin holds it: the origin is let go, the slot given back, the wake a 499', async () => {
    aborted.length = 0;
    const c = await RawH2.connect(port);
    c.write(frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, hpack(request('/open/held-reset'))));
    const until = Date.now() + 2000;
    while (Date.now() < until && budgets().active === 0) await pause(20);
    await pause(100);
    c.write(rstStream(1, C.NGHTTP2_CANCEL));
    expect(await settled()).toEqual(ZERO);
    const until2 = Date.now() + 2000;
    while (Date.now() < until2 && aborted.length === 0) await pause(20);
    expect(aborted).toEqual(['/open/held-reset']);
    c.destroy();
    await flushed(t.gw);
    const page = await t.gw.wakes.list({ environment: 'production', pathPattern: '^/open/held-reset$' }, 10, null);
    expect(page.rows[0]?.status).toBe(499);
    expect(page.rows[0]?.protocol).toBe('h2');
  });

  for (const how of ['reset', 'cut'] as const) {
    it(`every stream ${how === 'reset' ? 'reset by its client' : 'of a session whose connection is cut'}: the counters return to zero`, async () => {
      const during = await scenario(how);
      // The scenario did hold each budget (else this test could not fail).
      expect(during.buffered).toBeGreaterThan(0);
      expect(during.streamingUploads).toBe(1);
      expect(during.active).toBe(4);
      expect(during.waiting).toBeGreaterThan(0);
      expect(await settled()).toEqual(ZERO);
      for (const r of release.splice(0)) r();
      expect(await settled()).toEqual(ZERO);
      const r = await h2once(t.url, { ':path': '/open/big' });
      expect(r.status).toBe(200);
      expect(await settled()).toEqual(ZERO);
    });
  }
});

/**
 * server.http2_limits.max_header_list_bytes is a SETTINGS value Node holds a client to only
 * once the client acknowledged it: the gateway checks each header list itself (RFC 9113
 * §6.5.2's size: name and value octets plus 32 per field, pseudo-headers included), as
 * HTTP/1.1's max_header_bytes is (431, no wake, never forwarded), acknowledged or not.
 */
describe('HTTP/2 max_header_list_bytes, whether or not the client acknowledged SETTINGS', () => {
  let origin: http.Server;
  let t: TestGateway;
  let port: number;
  const LIMIT = 4096;
  /** The header bytes of each request that reached the origin. */
  const seen: number[] = [];

  beforeAll(async () => {
    // An origin that takes any header size: whatever the gateway lets through arrives.
    origin = http.createServer({ maxHeaderSize: 8 * 1024 * 1024 }, (req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push(req.rawHeaders.reduce((n, s) => n + s.length, 0));
        res.end('ok');
      });
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    t = await startGateway({
      server: {
        http2: 'h2c',
        max_header_bytes: 16384,
        http2_limits: { max_concurrent_streams: 100, max_header_list_bytes: LIMIT, max_resets_per_10s: 200 },
      },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    origin.closeAllConnections();
    await new Promise((r) => origin.close(r));
  });

  /** One stream of `fields` (in HEADERS + CONTINUATION frames of 16 kB): what came back on it. */
  const send = async (fields: [string, string][], ack: boolean) => {
    const c = await RawH2.connect(port);
    if (ack) {
      await new Promise((r) => setTimeout(r, 50));
      c.write(frame(T.SETTINGS, F.ACK, 0));
      await new Promise((r) => setTimeout(r, 20));
    }
    const block = hpack(fields);
    for (let i = 0; i < block.length || i === 0; i += 16_000) {
      const last = i + 16_000 >= block.length;
      const flags = (last ? F.END_HEADERS : 0) | (i === 0 ? F.END_STREAM : 0);
      c.write(frame(i === 0 ? T.HEADERS : T.CONTINUATION, flags, 1, block.subarray(i, i + 16_000)));
    }
    const until = Date.now() + 3000;
    const over = () =>
      c.frames.some((f) => f.stream === 1 && ((f.flags & F.END_STREAM) !== 0 || f.type === T.RST_STREAM));
    while (Date.now() < until && !over() && !c.closed) await new Promise((r) => setTimeout(r, 20));
    c.destroy();
    const data = c.frames.filter((f) => f.stream === 1 && f.type === T.DATA).map((f) => f.payload);
    return {
      text: Buffer.concat(data).toString(),
      reset: c.frames.some((f) => f.stream === 1 && f.type === T.RST_STREAM),
    };
  };
  /** request(path) and one x-pad field, the list's RFC 9113 size exactly `size`. */
  const sized = (path: string, size: number): [string, string][] => {
    const f = request(path);
    const base = f.reduce((n, [k, v]) => n + k.length + v.length + 32, 0);
    f.push(['x-pad', 'v'.repeat(size - base - 'x-pad'.length - 32)]);
    return f;
  };
  const of = (bytes: number): [string, string][] => {
    const f = request('/open/big');
    for (let i = 0; bytes > 0; i++, bytes -= 1000) f.push([`x-f${i}`, 'v'.repeat(1000)]);
    return f;
  };
  const refused = (text: string) => {
    const body = JSON.parse(text);
    expect(body.error.type).toBe('request_header_fields_too_large');
    expect(body.error.wake_id).toBeNull();
  };

  it('headerListSize is RFC 9113 §6.5.2: name and value octets plus 32 per field, pseudo-headers counted', () => {
    expect(headerListSize([])).toBe(0);
    expect(headerListSize([':method', 'GET', 'a', 'bc'])).toBe(7 + 3 + 32 + 3 + 32);
  });

  it('without the ACK: a list of exactly the limit is served, one octet more is 431 and never forwarded', async () => {
    seen.length = 0;
    expect((await send(sized('/open/at', LIMIT), false)).text).toBe('ok');
    expect(seen).toHaveLength(1);
    seen.length = 0;
    refused((await send(sized('/open/past', LIMIT + 1), false)).text);
    expect(seen).toEqual([]);
  });

  it("without the ACK: 10 kB and 120 kB of fields (past the limit, within Node's bound before the ACK) are 431, never forwarded", async () => {
    for (const n of [10_000, 120_000]) {
      seen.length = 0;
      refused((await send(of(n), false)).text);
      expect(seen, String(n)).toEqual([]);
    }
  });

  it('without the ACK: 1 MB of fields never reach the origin', async () => {
    seen.length = 0;
    await send(of(1_000_000), false);
    expect(seen).toEqual([]);
  });

  it('with the SETTINGS acknowledged: 10 kB of fields are refused (by Node or the gateway), never forwarded', async () => {
    seen.length = 0;
    const r = await send(of(10_000), true);
    expect(r.reset || r.text.includes('request_header_fields_too_large')).toBe(true);
    expect(seen).toEqual([]);
  });

  it('a list within the limit is served, acknowledged or not', async () => {
    seen.length = 0;
    expect((await send(of(2_000), true)).text).toBe('ok');
    expect((await send(of(2_000), false)).text).toBe('ok');
    expect(seen).toHaveLength(2);
  });
});
