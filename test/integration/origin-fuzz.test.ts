import net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * Origin answers drawn at random, well and badly formed (the proxy's client to origins
 * parses them: src/proxy/origin-client.ts), each followed by a request of the same
 * client that the origin answers properly. Whatever the first answer was, its request
 * gets an answer (the origin's or the gateway's error) in bounded time, the gateway
 * keeps serving, and the request after it gets exactly its own answer: nothing of one
 * answer is ever taken for another's.
 */

const STATUS_LINES = [
  'HTTP/1.1 200 OK',
  'HTTP/1.0 200 OK',
  'HTTP/1.1 404 Not Found',
  'HTTP/1.1 599 Odd',
  'HTTP/1.1 999 Too Far',
  'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK',
  'HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK',
  'HTTP/1.1 101 Switching Protocols',
  'HTTP/1.1 204 No Content',
  'HTTP/1.1 304 Not Modified',
  'HTP/1.1 200 OK',
  'HTTP/1.1 2000 OK',
  'HTTP/1.1 200',
  '',
  'garbage',
];

const HEADERS = [
  'Content-Type: text/plain',
  'Content-Length: 0',
  'Content-Length: 5',
  'Content-Length: 20',
  'Content-Length: 5, 6',
  'Content-Length: -1',
  'Content-Length: 99999999999999999999',
  'Transfer-Encoding: chunked',
  'Transfer-Encoding: gzip, chunked',
  'Transfer-Encoding: chunked, gzip',
  'Connection: close',
  'Connection: keep-alive',
  'Keep-Alive: timeout=0',
  'Keep-Alive: timeout=abc',
  'X-Control: \x01',
  'X-Folded: a\r\n b',
  'Bad Name: x',
  ': empty name',
  'X-Long: ' + 'L'.repeat(20_000),
  'Set-Cookie: a=b',
  'Set-Cookie: c=d',
  'Trailer: X-Sum',
];

const BODIES = [
  '',
  'hello',
  'x'.repeat(20),
  '5\r\nhello\r\n0\r\n\r\n',
  '5\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n',
  'zz\r\nhello\r\n0\r\n\r\n',
  '5\r\nhelloEXTRA\r\n0\r\n\r\n',
  '5\r\nhel',
  'HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nnobody!',
];

interface Case {
  status: string;
  headers: string[];
  body: string;
  /** After the answer: keep the connection, close it, or stall before writing anything. */
  end: 'keep' | 'close' | 'stall';
  /** Where to cut the bytes short (a fraction of them), or 1 for all. */
  cut: number;
  /** Written in two pieces this far in (a fraction), so parsing meets it across reads. */
  split: number;
}

const caseArb: fc.Arbitrary<Case> = fc.record({
  status: fc.constantFrom(...STATUS_LINES),
  headers: fc.array(fc.constantFrom(...HEADERS), { maxLength: 5 }),
  body: fc.oneof(fc.constantFrom(...BODIES), fc.string({ maxLength: 40 })),
  end: fc.constantFrom<Case['end']>('keep', 'keep', 'keep', 'close', 'close', 'stall'),
  cut: fc.oneof(fc.constant(1), fc.double({ min: 0, max: 1, noNaN: true })),
  split: fc.double({ min: 0, max: 1, noNaN: true }),
});

const bytesOf = (c: Case): Buffer => {
  const all = Buffer.from(`${c.status}\r\n${c.headers.map((h) => `${h}\r\n`).join('')}\r\n${c.body}`, 'latin1');
  return all.subarray(0, Math.floor(all.length * c.cut));
};

describe('origin answers at random', () => {
  let t: TestGateway;
  let origin: net.Server;
  let current: Case | null = null;
  const sockets = new Set<net.Socket>();

  beforeAll(async () => {
    origin = net.createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
      let buf = '';
      s.on('data', (d) => {
        buf += d.toString('latin1');
        for (;;) {
          const end = buf.indexOf('\r\n\r\n');
          if (end === -1) return;
          const head = buf.slice(0, end);
          buf = buf.slice(end + 4);
          const target = head.split(' ')[1] ?? '';
          const control = /\/control-(\d+)/.exec(target);
          if (control) {
            const body = `control ${control[1]}`;
            s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
            continue;
          }
          const c = current;
          if (c === null || c.end === 'stall') continue;
          const bytes = bytesOf(c);
          const at = Math.floor(bytes.length * c.split);
          s.write(bytes.subarray(0, at));
          setImmediate(() => {
            if (s.destroyed) return;
            s.write(bytes.subarray(at));
            if (c.end === 'close') s.end();
          });
        }
      });
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(origin.address() as net.AddressInfo).port}`;
    t = await startGateway({
      routes: [{ name: 'fz', prefix: '/fz', auth: 'none', timeout_ms: 300, origins: { production: url } }],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    for (const s of sockets) s.destroy();
    await new Promise((r) => origin.close(r));
  });

  it('every request is answered in bounded time, and the next one gets its own answer', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const n = run++;
        current = c;
        // The head comes in bounded time (the origin's, or the gateway's error after timeout_ms).
        const ac = new AbortController();
        const head = await Promise.race([
          fetch(`${t.url}/fz/case-${n}`, { signal: ac.signal }).then(
            (r) => r,
            () => 'cut' as const,
          ),
          new Promise<'hung'>((r) => setTimeout(() => r('hung'), 3000)),
        ]);
        expect(head).not.toBe('hung');
        // A body with no end said (read until the origin closes, which it may never do) is
        // given up on by its client after a moment: the gateway lets go of it too.
        if (typeof head !== 'string') {
          const bodyDone = head.arrayBuffer().then(
            () => true,
            () => true,
          );
          if (!(await Promise.race([bodyDone, new Promise((r) => setTimeout(() => r(false), 500))]))) ac.abort();
        }
        current = null;
        const next = await fetch(`${t.url}/fz/control-${n}`, { signal: AbortSignal.timeout(5000) });
        expect(next.status).toBe(200);
        expect(await next.text()).toBe(`control ${n}`);
      }),
      { numRuns: 100, seed: 20261127 },
    );
  }, 120_000);
});
