import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import type { Exchange } from '../../src/capture/recorder.js';
import type { Wake } from '../../src/capture/wake.js';
import type { Config } from '../../src/config/index.js';
import { tracingDefaults } from '../../src/config/tracing.js';
import { OtlpWriter } from '../../src/tracing/otlp.js';
import { type SpanInput, spanSelector } from '../../src/tracing/span-input.js';
import { type HexSource, wakeSpans } from '../../src/tracing/spans.js';
import { decodeSpans } from '../helpers/otlp-receiver.js';

// The SERVER span's status code, error and admission events for each way a request ends,
// from span inputs (and from an exchange, for when it was admitted), decoded with the
// OpenTelemetry project's generated definitions.

const require = createRequire(import.meta.url);
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');
const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

const ids: HexSource = {
  take: (n) => 'a1'.repeat(n).slice(0, n),
};
const routes = [
  { name: 'api', rate_limit: 'default', origins: { production: 'http://origin:8080' } },
] as unknown as Config['routes'];

const START = 1_700_000_000_000;
const input = (o: Partial<SpanInput>): SpanInput => ({
  kind: 'wake',
  traceId: 'ab'.repeat(16),
  spanId: 'cd'.repeat(8),
  parentSpanId: '',
  wakeId: 'wk_1',
  method: 'GET',
  route: 'api',
  path: '/items',
  status: 200,
  clientIp: '127.0.0.1',
  userAgent: '',
  protocol: 'http/1.1',
  scheme: 'http',
  upstreamPath: '/items',
  keyId: '',
  environment: 'production',
  start: START,
  durationMs: 10,
  upstreamAtMs: 4,
  errorType: '',
  ...o,
});

/** The spans of one input, decoded (SERVER first), with each event's time (ms since the epoch). */
function spans(i: SpanInput) {
  const w = new OtlpWriter({ serviceName: 'svc', scopeName: 'wakegate', scopeVersion: '1' });
  w.start();
  wakeSpans({ routes }, ids)(i, w);
  const body = w.finish();
  const decoded = decodeSpans(body);
  const raw = Request.toObject(Request.decode(body), { longs: String });
  const events = (raw.resourceSpans[0].scopeSpans[0].spans[0].events ?? []) as { timeUnixNano: string }[];
  return {
    server: decoded[0],
    client: decoded[1],
    eventMs: events.map((e) => Number(BigInt(e.timeUnixNano) / 1_000_000n)),
  };
}

describe('a request with no answer (its client went away first)', () => {
  it('499 before the origin answered: no status code on either span; the SERVER span an error of client_closed_request', () => {
    const { server, client } = spans(input({ status: 499 }));
    expect(server?.attributes['http.response.status_code']).toBeUndefined();
    expect(server?.attributes['error.type']).toBe('client_closed_request');
    expect(server?.status).toEqual({ code: 2, message: 'client_closed_request' });
    // The gateway cancelled the origin's request for its caller: no error of the origin's.
    expect(client?.attributes['http.response.status_code']).toBeUndefined();
    expect(client?.attributes['error.type']).toBeUndefined();
    expect(client?.status.code).toBe(0);
  });

  it('499 before it went upstream: no CLIENT span, no status code', () => {
    const { server, client } = spans(input({ status: 499, upstreamAtMs: -1, upstreamPath: '', admittedAtMs: 1 }));
    expect(client).toBeUndefined();
    expect(server?.attributes['http.response.status_code']).toBeUndefined();
    expect(server?.events.map((e) => e.name)).toEqual(['wakegate.admission']);
    expect(server?.events[0]?.attributes['wakegate.admission.outcome']).toBe('admitted');
  });

  it('no status recorded at all (0): no status code of 0, error.type the conventions’ fallback', () => {
    const { server } = spans(input({ status: 0, upstreamAtMs: -1, upstreamPath: '' }));
    expect(server?.attributes['http.response.status_code']).toBeUndefined();
    expect(server?.attributes['error.type']).toBe('_OTHER');
    expect(server?.status.code).toBe(2);
  });

  it('a status the gateway sent is kept: its own 502 with its error type', () => {
    const { server } = spans(input({ status: 502, errorType: 'upstream_unavailable' }));
    expect(server?.attributes['http.response.status_code']).toBe(502);
    expect(server?.attributes['error.type']).toBe('upstream_unavailable');
  });
});

describe('the admission event', () => {
  it('admitted, then refused before it went upstream: admitted at its time, then wakegate.refused', () => {
    const { server, client, eventMs } = spans(
      input({ status: 400, errorType: 'invalid_request', upstreamAtMs: -1, upstreamPath: '', admittedAtMs: 2 }),
    );
    expect(client).toBeUndefined();
    expect(server?.events.map((e) => e.name)).toEqual(['wakegate.admission', 'wakegate.refused']);
    expect(server?.events[0]?.attributes).toEqual({
      'wakegate.admission.outcome': 'admitted',
      'wakegate.rate_limit': 'default',
    });
    expect(server?.events[1]?.attributes).toEqual({ 'wakegate.refused_reason': 'invalid_request' });
    expect(eventMs).toEqual([START + 2, START + 10]);
  });

  it('refused by admission: refused, and why, at arrival', () => {
    const { server, eventMs } = spans(
      input({ status: 429, errorType: 'rate_limit_exceeded', upstreamAtMs: -1, upstreamPath: '', admittedAtMs: -1 }),
    );
    expect(server?.events.map((e) => e.name)).toEqual(['wakegate.admission']);
    expect(server?.events[0]?.attributes).toMatchObject({
      'wakegate.admission.outcome': 'refused',
      'wakegate.admission.refused_reason': 'rate_limit_exceeded',
    });
    expect(eventMs).toEqual([START]);
  });

  it('an input that does not say when it was admitted: admitted when it went upstream', () => {
    const { server, eventMs } = spans(input({}));
    expect(server?.events[0]?.attributes['wakegate.admission.outcome']).toBe('admitted');
    expect(eventMs).toEqual([START + 4]);
  });
});

describe('spanSelector: when the exchange was admitted', () => {
  const select = (x: Partial<Exchange> & { tAdmit?: number }) => {
    const got: SpanInput[] = [];
    const hook = spanSelector({ tracing: { ...tracingDefaults, otlp_url: 'http://c/v1/traces' }, routes }, (s) =>
      got.push(s),
    );
    const exchange = {
      traceId: 'ab'.repeat(16),
      spanId: 'cd'.repeat(8),
      parentSpanId: '',
      traceSampled: true,
      protocol: 'http/1.1',
      secure: false,
      upstreamPath: '',
      start: START,
      t0: 1000,
      tUp: 0,
      errorType: '',
      ...x,
    } as Exchange;
    hook(exchange, { id: 'wk_1', status: 400, route: 'api', latency_ms: 5 } as Wake, 1010);
    return got[0];
  };

  it('from tAdmit when the exchange has it, else from going upstream, else -1', () => {
    expect(select({ tAdmit: 1002.5 })?.admittedAtMs).toBe(2.5);
    expect(select({ tUp: 1004 })?.admittedAtMs).toBe(4);
    expect(select({})?.admittedAtMs).toBe(-1);
  });
});
