import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Regression tests from a review of the /v2 contract and W3C Trace Context (each failed before its fix).

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

/** A GET through the gateway with the headers given; answers what the origin saw of traceparent. */
function through(url: string, headers: Record<string, string>): Promise<{ status: number; seen: string[] }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { headers }, (res) => {
      let b = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        b += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, seen: (JSON.parse(b) as { tp: string[] }).tp }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * W3C Trace Context (Level 1 §3.2.2.5.2 "Other Flags"): "The behavior of other flags, such as
 * (00000100) is not defined and is reserved for future use. Vendors MUST set those to zero."
 * §3.2.4: a higher version is read for its trace id, parent id and *sampled bit*, and the new
 * traceparent is built as version 00. The gateway writes its own version-00 traceparent (its
 * own span as parent), so the flags it sends hold no bit it does not know (sampled; Level 2's
 * random bit 0x02 at most).
 */
describe('trace-flags the origin receives (tracing off: the caller’s decision passes through)', () => {
  let origin: TestServer;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const tp: string[] = [];
        for (let i = 0; i < req.rawHeaders.length; i += 2) {
          if ((req.rawHeaders[i] as string).toLowerCase() === 'traceparent') tp.push(req.rawHeaders[i + 1] as string);
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ tp }));
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

  it('version 00 with flags ff: the trace is kept, the sampled bit passes, the undefined bits are zero', async () => {
    const r = await through(`${t.url}/open/ff`, { traceparent: `00-${TRACE}-${PARENT}-ff` });
    expect(r.status).toBe(200);
    expect(r.seen).toHaveLength(1);
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(r.seen[0] as string);
    expect(m?.[1]).toBe(TRACE);
    expect(m?.[2]).not.toBe(PARENT);
    const flags = Number.parseInt(m?.[3] as string, 16);
    expect(flags & 0x01).toBe(1);
    expect(flags & ~0x03, `origin received trace-flags ${m?.[3]}`).toBe(0);
  });

  it('a later version (cc) with flags 09: sent as version 00 with only the sampled bit of its flags', async () => {
    const r = await through(`${t.url}/open/cc`, { traceparent: `cc-${TRACE}-${PARENT}-09-future-field` });
    expect(r.status).toBe(200);
    expect(r.seen).toHaveLength(1);
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(r.seen[0] as string);
    expect(m?.[1]).toBe(TRACE);
    expect(m?.[3], `origin received ${r.seen[0]}`).toBe('01');
  });

  it('the wake of such a request still stores the caller’s trace (GET /v2/wakes?trace_id=)', async () => {
    await through(`${t.url}/open/stored`, { traceparent: `00-${TRACE}-${PARENT}-ff` });
    await flushed(t.gw);
    const r = await fetch(`${t.url}/v2/wakes?trace_id=${TRACE}&path=/open/stored`, { headers: bearer(t.admin) });
    const page = (await r.json()) as { data: { trace_id?: string }[] };
    expect(page.data.length).toBe(1);
    expect(page.data[0]?.trace_id).toBe(TRACE);
  });
});
