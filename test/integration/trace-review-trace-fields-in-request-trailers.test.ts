import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange } from '../helpers/raw.js';

// Regression tests from a review of tracing as an attacker (2026-11-27).

/*
 * The defect (fixed; low): a client's `traceparent` / `tracestate` sent as request TRAILER fields reach
 * the origin verbatim, bypassing the gateway's trace-context rules.
 *
 * docs/tracing.md: the client's traceparent is replaced by the gateway's own (its span as
 * parent), and "An invalid traceparent is ignored, as if none had come ... Its tracestate is not
 * passed on" (src/proxy/headers.ts drops both header fields). src/proxy/trailers.ts filters
 * trailers "as its headers are" (x-wakegate-*, x-forwarded-*, authorization, host ... are
 * dropped) but not the trace fields, so a client sends an uppercase (invalid) traceparent
 * header, which is dropped, and then `traceparent: 00-<any trace>-<any parent>-01` and
 * `tracestate: <anything>` in the chunked body's trailer section: the origin is handed a
 * second, client-forged trace context (Node exposes it as req.trailers; an origin or
 * middleware that merges trailers, or reads the last traceparent it saw, continues the
 * forged trace and propagates the forged tracestate).
 *
 * Correct behaviour: trace-context fields the gateway governs in the header section are not
 * passed on as trailers either (dropped like the other gateway-governed names), so the only
 * traceparent the origin sees is the gateway's and no tracestate passes after an invalid
 * traceparent.
 */

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

describe('trace context smuggled in request trailers', () => {
  let origin: TestServer;
  let t: TestGateway;
  const seen: { traceparent?: string; tracestate?: string; trailers: Record<string, string> }[] = [];
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push({
          traceparent: req.headers.traceparent as string | undefined,
          tracestate: req.headers.tracestate as string | undefined,
          trailers: { ...(req.trailers as Record<string, string>) },
        });
        res.end('ok');
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

  it('an invalid traceparent header, then traceparent and tracestate trailers: neither reaches the origin', async () => {
    const port = Number(new URL(t.url).port);
    const r = await rawExchange(
      port,
      'POST /open/t HTTP/1.1\r\nHost: x\r\n' +
        `traceparent: 00-${TRACE.toUpperCase()}-${PARENT}-01\r\ntracestate: hdr=1\r\n` +
        'Transfer-Encoding: chunked\r\nTrailer: traceparent, tracestate\r\nConnection: close\r\n\r\n' +
        '2\r\nhi\r\n0\r\n' +
        `traceparent: 00-${TRACE}-${PARENT}-01\r\ntracestate: forged=1\r\n\r\n`,
    );
    expect(r.text).toMatch(/^HTTP\/1\.1 200/);
    const got = seen.at(-1);
    // The header rules held (tracing off: none sent, the tracestate of an invalid traceparent dropped)...
    expect(got?.traceparent).toBeUndefined();
    expect(got?.tracestate).toBeUndefined();
    // ...but the trailers carry the client's forged trace context to the origin.
    expect(got?.trailers.traceparent, JSON.stringify(got?.trailers)).toBeUndefined();
    expect(got?.trailers.tracestate, JSON.stringify(got?.trailers)).toBeUndefined();
  });
});
