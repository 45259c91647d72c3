// Regression tests from a review of the 2026-11-28 session's changes (each failed before its fix).
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// W3C Trace Context §3.3.1.5: "the vendor MUST truncate whole entries. Entries larger than 128
// characters long SHOULD be removed first. Then entries SHOULD be removed starting from the end."
// Truncation is to reach 512 characters: boundTracestate (tracing/tracestate.ts withinLength)
// removes every entry longer than 128 at once, even when removing one is enough, so it loses
// entries that fit, and a list made only of long entries is dropped whole.

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

function through(url: string, tracestate: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { headers: ['Host', 'api.test', 'traceparent', TRACEPARENT, 'tracestate', tracestate], agent: false },
      (res) => {
        let b = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          b += c;
        });
        res.on('end', () => resolve((JSON.parse(b) as { ts: string[] }).ts));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('tracestate truncation to 512 characters, review', () => {
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
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it('removes long entries only until the list fits: one of two is enough here', async () => {
    const l1 = `l1=${'x'.repeat(140)}`; // 143 characters
    const l2 = `l2=${'y'.repeat(140)}`;
    const mids = Array.from({ length: 4 }, (_, i) => `m${i}=${'z'.repeat(57)}`); // 60 each
    const list = [l1, ...mids, l2].join(','); // 531 characters: dropping l2 alone leaves 387
    expect(list.length).toBe(531);
    const seen = await through(`${t.url}/open/a`, list);
    expect(seen).toEqual([[l1, ...mids].join(',')]);
  });

  it('does not drop a whole list of long entries when two of them fit in 512', async () => {
    const longs = ['a', 'b', 'c'].map((k) => `${k}=${k.repeat(198)}`); // 200 each, 602 joined
    const seen = await through(`${t.url}/open/b`, longs.join(','));
    // Removing the last one leaves 401 characters; the origin got no tracestate at all.
    expect(seen).toEqual([longs.slice(0, 2).join(',')]);
  });
});
