import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// W3C Trace Context §3.3: a tracestate the gateway passes on while it takes part in the trace
// is one list, its malformed and repeated members dropped, at most 32 members and 512
// characters. Before, it went on as it came: an origin's OpenTelemetry SDK, which throws a
// list past those bounds away whole, lost every vendor's entry for one bad one.

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/** A GET through the gateway with these raw headers; answers the tracestate fields the origin saw. */
function through(url: string, headers: string[]): Promise<{ status: number; seen: string[] }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { headers: ['Host', 'api.test', ...headers] }, (res) => {
      let b = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        b += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, seen: (JSON.parse(b) as { ts: string[] }).ts }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the tracestate an origin receives', () => {
  let origin: TestServer;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const ts: string[] = [];
        for (let i = 0; i < req.rawHeaders.length; i += 2) {
          if ((req.rawHeaders[i] as string).toLowerCase() === 'tracestate') ts.push(req.rawHeaders[i + 1] as string);
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ts }));
      });
    });
    t = await startGateway({
      capture: { flush_interval_ms: 20 },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it('two fields with a malformed member and a repeated key: one list of the good, first ones', async () => {
    const r = await through(`${t.url}/open/a`, [
      'traceparent',
      TRACEPARENT,
      'tracestate',
      'congo=t61rcWkgMzE, Rojo=bad',
      'tracestate',
      'rojo=00f067aa0ba902b7,congo=again',
    ]);
    expect(r.status).toBe(200);
    expect(r.seen).toEqual(['congo=t61rcWkgMzE,rojo=00f067aa0ba902b7']);
  });

  it('40 members: the first 32 go on', async () => {
    const many = Array.from({ length: 40 }, (_, i) => `v${i}=x`);
    const r = await through(`${t.url}/open/b`, ['traceparent', TRACEPARENT, 'tracestate', many.join(',')]);
    expect(r.seen).toEqual([many.slice(0, 32).join(',')]);
  });

  it('past 512 characters: the member over 128 goes first, then members from the end', async () => {
    const big = `big=${'x'.repeat(300)}`;
    const rest = Array.from({ length: 10 }, (_, i) => `m${i}=${'y'.repeat(60)}`);
    const r = await through(`${t.url}/open/c`, ['traceparent', TRACEPARENT, 'tracestate', [big, ...rest].join(',')]);
    expect(r.seen).toHaveLength(1);
    expect((r.seen[0] as string).length).toBeLessThanOrEqual(512);
    expect(r.seen[0]).toBe(rest.slice(0, 8).join(','));
  });

  it('without a valid traceparent, no tracestate goes on (§3.3.1.1)', async () => {
    const r = await through(`${t.url}/open/d`, ['traceparent', 'zz-bad', 'tracestate', 'congo=t61rcWkgMzE']);
    expect(r.seen).toEqual([]);
  });

  // From a review of this session's changes: long members go only until the list fits.
  it('past 512 characters: long members go from the end only until the list fits', async () => {
    const l1 = `l1=${'x'.repeat(140)}`;
    const l2 = `l2=${'y'.repeat(140)}`;
    const mids = Array.from({ length: 4 }, (_, i) => `m${i}=${'z'.repeat(57)}`);
    const list = [l1, ...mids, l2].join(','); // 531 characters: dropping l2 alone leaves 387
    expect(list.length).toBe(531);
    const one = await through(`${t.url}/open/e`, ['traceparent', TRACEPARENT, 'tracestate', list]);
    expect(one.seen).toEqual([[l1, ...mids].join(',')]);
    // Only long members: two of three fit (401 characters), where all were dropped.
    const longs = ['a', 'b', 'c'].map((k) => `${k}=${k.repeat(198)}`);
    const two = await through(`${t.url}/open/f`, ['traceparent', TRACEPARENT, 'tracestate', longs.join(',')]);
    expect(two.seen).toEqual([longs.slice(0, 2).join(',')]);
  });
});
