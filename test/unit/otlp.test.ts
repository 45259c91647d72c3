import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CLIENT,
  OtlpWriter,
  otlpAttrs,
  otlpKey,
  SERVER,
  type SpanSink,
  type SpanStart,
} from '../../src/tracing/otlp.js';
import type { SpanInput } from '../../src/tracing/span-input.js';
import { type HexSource, wakeSpans } from '../../src/tracing/spans.js';
import { type WebhookAttempt, wakeTraceOf, webhookSpan } from '../../src/tracing/webhook-spans.js';
import { decodeRequest, SdkSpans } from '../helpers/otlp-oracle.js';
import { decodeSpans } from '../helpers/otlp-receiver.js';

/**
 * Our OTLP encoder against the OpenTelemetry project's generic serializer: for the
 * same spans, both export requests decode (with the project's generated definitions)
 * to the same message.
 */

type Value = string | number | boolean;
interface SpanData {
  start: SpanStart;
  attrs: [string, Value][];
  events: { name: string; timeMs: number; attrs: [string, Value][] }[];
  links: { traceId: string; spanId: string }[];
  error: string;
}

/** Plays a span's calls into a sink. */
function play(w: SpanSink, spans: SpanData[]): void {
  const put = ([k, v]: [string, Value]) => {
    const key = otlpKey(k);
    if (typeof v === 'string') w.str(key, v);
    else if (typeof v === 'number') w.num(key, v);
    else w.bool(key, v);
  };
  for (const s of spans) {
    w.begin(s.start);
    s.attrs.forEach(put);
    for (const e of s.events) {
      w.event(e.name, e.timeMs);
      e.attrs.forEach(put);
      w.endEvent();
    }
    for (const l of s.links) w.link(l.traceId, l.spanId);
    w.end(s.error);
  }
}

type Scope = { serviceName: string; scopeName: string; scopeVersion: string };

/** A root span's start with fixed ids, and what a test sets. */
const rootStart = (o: Partial<SpanStart>): SpanStart => ({
  traceId: 'ab'.repeat(16),
  spanId: 'cd'.repeat(8),
  parentSpanId: '',
  remoteParent: false,
  name: 'n',
  kind: SERVER,
  startMs: 0,
  endMs: 0,
  ...o,
});

/** Both encodings of the same calls, decoded. */
function both(scope: Scope, calls: (w: SpanSink) => void): [ours: unknown, theirs: unknown, bytes: Uint8Array] {
  const w = new OtlpWriter(scope);
  w.start();
  calls(w);
  const bytes = w.finish();
  const o = new SdkSpans(scope);
  calls(o);
  return [decodeRequest(bytes), decodeRequest(o.serialize()), bytes];
}

const hex = (n: number) => fc.uint8Array({ minLength: n, maxLength: n }).map((b) => Buffer.from(b).toString('hex'));
// Any code point (whole surrogate pairs; a lone surrogate is a case of its own below), empty included.
const text = (maxLength: number) => fc.string({ unit: 'binary', maxLength });
// Long strings (fast-check's default size keeps strings short): past 127 bytes and 127 characters,
// and ASCII of just under 128 with a few wider characters after it (its length's varint grows by a byte).
const long = fc.oneof(
  fc.string({ unit: 'binary', minLength: 40, maxLength: 400, size: 'max' }),
  fc
    .tuple(fc.integer({ min: 100, max: 127 }), fc.string({ unit: fc.constantFrom('é', '東', '😀'), maxLength: 12 }))
    .map(([n, t]) => 'a'.repeat(n) + t),
);
// Short ASCII with a wider character inside (the writer's one-pass ASCII attribute gives up
// part-way and writes it again): binary strings are almost never ASCII at their start.
const mixed = fc
  .tuple(
    fc.string({ unit: 'grapheme-ascii', maxLength: 30 }),
    fc.constantFrom('é', '東', '😀', '\u0080'),
    fc.string({ unit: 'grapheme-ascii', maxLength: 30 }),
  )
  .map(([a, w, b]) => a + w + b);
// Keys the SDK's record keeps in the order given: no array index (sorted first by JS) and no __proto__.
const key = text(40).filter((k) => !/^(0|[1-9][0-9]*)$/.test(k) && k !== '__proto__');
const value: fc.Arbitrary<Value> = fc.oneof(
  text(60),
  long,
  mixed,
  fc.string({ unit: 'grapheme-ascii', maxLength: 100 }),
  fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
  fc.integer({ min: -1000, max: 1000 }),
  fc.constantFrom(0, -0, -1, 2 ** 31 - 1, 2 ** 31, -(2 ** 31), 2 ** 32, 2 ** 32 - 1, 2 ** 53 - 1, -(2 ** 53 - 1)),
  fc.double(),
  fc.boolean(),
);
const attrs = (maxLength: number) => fc.uniqueArray(fc.tuple(key, value), { maxLength, selector: (t) => t[0] });
// Epoch ms (fractional) up to 2100, durations up to a day.
const ms = fc.double({ min: 0, max: 4_102_444_800_000, noNaN: true });
const duration = fc.double({ min: 0, max: 86_400_000, noNaN: true });

const span: fc.Arbitrary<SpanData> = fc
  .record({
    traceId: hex(16),
    spanId: hex(8),
    parentSpanId: fc.oneof(fc.constant(''), hex(8)),
    remoteParent: fc.boolean(),
    name: fc.oneof(text(40), long),
    kind: fc.constantFrom(SERVER, CLIENT),
    startMs: ms,
    duration,
    attrs: attrs(30),
    events: fc.array(fc.record({ name: fc.oneof(text(40), long), at: duration, attrs: attrs(8) }), { maxLength: 3 }),
    links: fc.array(fc.record({ traceId: hex(16), spanId: hex(8) }), { maxLength: 3 }),
    error: fc.oneof(
      fc.constant(''),
      text(80).filter((s) => s !== ''),
      long,
    ),
  })
  .map((r) => ({
    start: {
      traceId: r.traceId,
      spanId: r.spanId,
      parentSpanId: r.parentSpanId,
      remoteParent: r.remoteParent,
      name: r.name,
      kind: r.kind,
      startMs: r.startMs,
      endMs: r.startMs + r.duration,
    },
    attrs: r.attrs,
    events: r.events.map((e) => ({ name: e.name, timeMs: r.startMs + e.at, attrs: e.attrs })),
    links: r.links,
    error: r.error,
  }));

const scope: fc.Arbitrary<Scope> = fc.record({
  serviceName: text(60).filter((s) => s !== ''),
  scopeName: fc.constant('wakegate'),
  scopeVersion: fc.oneof(fc.constant(''), text(20)),
});

describe('OtlpWriter against ProtobufTraceSerializer (the same message decoded)', () => {
  it('random spans: unicode and empty strings, large and negative ints, doubles, many attributes, events, links, errors', () => {
    fc.assert(
      fc.property(scope, fc.array(span, { minLength: 1, maxLength: 6 }), (sc, spans) => {
        const [ours, theirs] = both(sc, (w) => play(w, spans));
        expect(ours).toEqual(theirs);
      }),
      { numRuns: 300 },
    );
  });

  it('lengths past one and two varint bytes: a 20 KB string, 200 attributes, an event past 128 bytes', () => {
    const long = 'é'.repeat(5000) + 'x'.repeat(10_000);
    const many: [string, Value][] = Array.from({ length: 200 }, (_, i) => [`attr.${i}`, i % 3 ? `v${i}` : i * 1e9]);
    const spans: SpanData[] = [
      {
        start: rootStart({ name: long, startMs: 1_764_000_000_123.456, endMs: 1_764_000_000_124 }),
        attrs: [['big', long], ...many],
        events: [
          { name: 'short', timeMs: 1_764_000_000_123.5, attrs: [['a', 1]] },
          { name: 'e'.repeat(127), timeMs: 1_764_000_000_123.5, attrs: [['b', 'y'.repeat(300)]] },
        ],
        links: [{ traceId: '01'.repeat(16), spanId: '02'.repeat(8) }],
        error: 'boom',
      },
    ];
    const sc = { serviceName: 'svc', scopeName: 'wakegate', scopeVersion: '1.2.3' };
    const [ours, theirs, bytes] = both(sc, (w) => play(w, spans));
    expect(bytes.length).toBeGreaterThan(40_000);
    expect(ours).toEqual(theirs);
  });

  it('the comparison tells apart what differs: an int 0 is not a string "0", nor an absent value', () => {
    const sc = { serviceName: 'svc', scopeName: 'wakegate', scopeVersion: '' };
    const one = (v: Value): SpanData[] => [
      {
        start: rootStart({}),
        attrs: [['k', v]],
        events: [],
        links: [],
        error: '',
      },
    ];
    const [zero] = both(sc, (w) => play(w, one(0)));
    const [text0] = both(sc, (w) => play(w, one('0')));
    const [no] = both(sc, (w) => play(w, one(false)));
    expect(zero).not.toEqual(text0);
    expect(zero).not.toEqual(no);
    const attr = (zero as { resourceSpans: { scopeSpans: { spans: { attributes: unknown[] }[] }[] }[] })
      .resourceSpans[0]?.scopeSpans[0]?.spans[0]?.attributes[0];
    expect(attr).toEqual({ key: 'k', value: { intValue: '0', value: 'intValue' } });
  });

  it('a lone surrogate is written as U+FFFD (valid UTF-8, as Node encodes it)', () => {
    const w = new OtlpWriter({ serviceName: 'svc', scopeName: 'wakegate', scopeVersion: '' });
    w.start();
    w.begin(rootStart({ name: 'a\ud800b', kind: CLIENT, startMs: 1, endMs: 2 }));
    w.str(otlpKey('k'), '\udc00');
    w.end('');
    const [s] = decodeSpans(w.finish());
    expect(s?.name).toBe('a\ufffdb');
    expect(s?.attributes).toEqual({ k: '\ufffd' });
  });
});

/** The same hex digits on every pass: each sink gets its own copy of the sequence. */
function fixedIds(seed: number): HexSource {
  let i = seed;
  return {
    take(n) {
      let s = '';
      while (s.length < n) s += ((i++ * 2654435761) >>> 0).toString(16).padStart(8, '0');
      return s.slice(0, n);
    },
  };
}

const routes = [
  { name: 'api', rate_limit: 'default', origins: { production: 'http://origin:8080', staging: 'https://st.example' } },
  { name: 'ünï', rate_limit: 'tight', origins: { production: 'http://[::1]:9' } },
] as unknown as Parameters<typeof wakeSpans>[0]['routes'];

const wakeInput: fc.Arbitrary<SpanInput> = fc.record({
  kind: fc.constant('wake' as const),
  traceId: hex(16),
  spanId: hex(8),
  parentSpanId: fc.oneof(fc.constant(''), hex(8)),
  wakeId: fc.string({ maxLength: 30 }),
  method: fc.constantFrom('GET', 'POST', 'DELETE', 'PATCH'),
  // 'none' and '': a request that matched no route.
  route: fc.constantFrom('api', 'ünï', 'gone', 'none', ''),
  path: fc.oneof(text(40), long),
  status: fc.constantFrom(0, 200, 204, 301, 400, 404, 429, 499, 500, 502, 504),
  clientIp: fc.constantFrom('127.0.0.1', '::1', '203.0.113.9'),
  userAgent: fc.oneof(fc.constant(''), text(40), long),
  protocol: fc.constantFrom('http/1.1', 'h2'),
  scheme: fc.constantFrom('http', 'https'),
  upstreamPath: fc.oneof(fc.constant(''), text(40), fc.constant('/base/items?token=s3cret&x=1')),
  keyId: fc.oneof(fc.constant(''), fc.string({ maxLength: 20 })),
  environment: fc.constantFrom('production', 'staging', 'other'),
  start: fc.integer({ min: 1_600_000_000_000, max: 2_000_000_000_000 }),
  durationMs: duration,
  upstreamAtMs: fc.oneof(fc.constant(-1), fc.double({ min: 0, max: 1000, noNaN: true })),
  errorType: fc.constantFrom('', 'timeout', 'upstream_unavailable', 'rate_limited', 'unauthorized'),
});

const webhookInput: fc.Arbitrary<WebhookAttempt> = fc.record({
  kind: fc.constant('webhook' as const),
  deliveryId: fc.string({ maxLength: 30 }),
  eventType: fc.constantFrom('wake.error', 'wake.slow', 'key.created'),
  attempt: fc.integer({ min: 1, max: 20 }),
  url: fc.constantFrom('', 'http://127.0.0.1:9000/hook?token=secret', 'https://hooks.example/x'),
  payload: fc.oneof(
    fc.constant('{"type":"key.created","data":{}}'),
    fc
      .tuple(hex(16), hex(8))
      .map(([t, s]) => JSON.stringify({ type: 'wake.error', data: { wake: { trace_id: t, span_id: s } } })),
    fc.constant('not json "trace_id"'),
  ),
  startMs: fc.integer({ min: 1_600_000_000_000, max: 2_000_000_000_000 }),
  durationMs: duration,
  status: fc.constantFrom(0, 200, 204, 400, 500, 503),
  error: fc.oneof(fc.constant(null), fc.constantFrom('timeout', 'ECONNREFUSED')),
});

describe('the spans wakegate exports, both ways', () => {
  it('a wake (SERVER, admission event, CLIENT) and a webhook attempt (CLIENT, linked)', () => {
    const sc = { serviceName: 'wakegate', scopeName: 'wakegate', scopeVersion: '0.1.0' };
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            wakeInput,
            // Methods the conventions do not know (_OTHER, with method_original) and ones they do past the four above.
            wakeInput.chain((i) =>
              fc.constantFrom('PROPFIND', 'get', 'QUERY', 'TRACE', 'CONNECT').map((method) => ({ ...i, method })),
            ),
            webhookInput,
          ),
          { minLength: 1, maxLength: 8 },
        ),
        fc.nat(),
        (items, seed) => {
          const calls = (ids: HexSource) => (w: SpanSink) => {
            const ofWake = wakeSpans({ routes }, ids);
            for (const i of items) {
              if (i.kind === 'wake') ofWake(i, w);
              else webhookSpan(i, w, ids);
            }
          };
          const w = new OtlpWriter(sc);
          w.start();
          calls(fixedIds(seed))(w);
          const o = new SdkSpans(sc);
          calls(fixedIds(seed))(o);
          expect(decodeRequest(w.finish())).toEqual(decodeRequest(o.serialize()));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a wake that went upstream: the decoded spans carry the conventions names', () => {
    const w = new OtlpWriter({ serviceName: 'wakegate', scopeName: 'wakegate', scopeVersion: '0.1.0' });
    w.start();
    wakeSpans({ routes }, fixedIds(1))(
      {
        kind: 'wake',
        traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
        spanId: '00f067aa0ba902b7',
        parentSpanId: '1111111111111111',
        wakeId: 'wk_1',
        method: 'GET',
        route: 'api',
        path: '/items',
        status: 502,
        clientIp: '127.0.0.1',
        userAgent: 'curl/8',
        protocol: 'h2',
        scheme: 'https',
        upstreamPath: '/v1/items?token=s3cret',
        keyId: 'key_1',
        environment: 'production',
        start: 1_764_000_000_000,
        durationMs: 12.5,
        upstreamAtMs: 0.25,
        errorType: '',
      },
      w,
    );
    const [server, client] = decodeSpans(w.finish());
    expect(server).toMatchObject({
      name: 'GET api',
      kind: 2,
      parentSpanId: '1111111111111111',
      startNs: 1_764_000_000_000_000_000n,
      endNs: 1_764_000_000_012_500_000n,
      attributes: {
        'http.request.method': 'GET',
        'http.route': 'api',
        'url.path': '/items',
        'http.response.status_code': 502,
        'client.address': '127.0.0.1',
        'network.protocol.version': '2',
        'user_agent.original': 'curl/8',
        'error.type': '502',
        'url.scheme': 'https',
      },
      events: [
        {
          name: 'wakegate.admission',
          attributes: { 'wakegate.admission.outcome': 'admitted', 'wakegate.key_id': 'key_1' },
        },
      ],
      status: { code: 2, message: '502' },
      resource: { 'service.name': 'wakegate' },
    });
    expect(client).toMatchObject({
      name: 'GET',
      kind: 3,
      parentSpanId: '00f067aa0ba902b7',
      startNs: 1_764_000_000_000_250_000n,
      attributes: {
        'http.request.method': 'GET',
        'server.address': 'origin',
        'server.port': 8080,
        'http.response.status_code': 502,
        'error.type': '502',
        // What was asked of the origin, its query (which may carry secrets) left out.
        'url.full': 'http://origin:8080/v1/items',
      },
      status: { code: 2, message: '502' },
    });
  });
});

/** One wake's spans, decoded: [SERVER, CLIENT?]. */
function wakeOf(o: Partial<SpanInput>, cfgRoutes = routes) {
  const w = new OtlpWriter({ serviceName: 'wakegate', scopeName: 'wakegate', scopeVersion: '0.1.0' });
  w.start();
  wakeSpans({ routes: cfgRoutes }, fixedIds(1))(
    {
      kind: 'wake',
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
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
      start: 1_764_000_000_000,
      durationMs: 3,
      upstreamAtMs: 0.5,
      errorType: '',
      ...o,
    },
    w,
  );
  return decodeSpans(w.finish());
}

describe('HTTP semantic conventions of the wake spans', () => {
  const UNSET = 0;
  const ERROR = 2;

  it('CLIENT span: any status from 400 is an error, error.type its status code; the SERVER span only from 500', () => {
    for (const status of [400, 404, 429, 500, 502, 504]) {
      const [server, client] = wakeOf({ status });
      expect(client?.kind).toBe(CLIENT);
      expect(client?.status).toEqual({ code: ERROR, message: String(status) });
      expect(client?.attributes['http.response.status_code']).toBe(status);
      expect(client?.attributes['error.type']).toBe(String(status));
      expect(server?.status.code).toBe(status >= 500 ? ERROR : UNSET);
      expect(server?.attributes['error.type']).toBe(status >= 500 ? String(status) : undefined);
    }
  });

  it('CLIENT span: a 1xx-3xx is no error and has no error.type', () => {
    for (const status of [101, 200, 204, 304, 399]) {
      const [server, client] = wakeOf({ status });
      expect(client?.status.code).toBe(UNSET);
      expect(client?.attributes['error.type']).toBeUndefined();
      expect(client?.attributes['http.response.status_code']).toBe(status);
      expect(server?.status.code).toBe(UNSET);
    }
  });

  it("CLIENT span: the gateway's error type when it answered for the origin, with no status code", () => {
    const [server, client] = wakeOf({ status: 504, errorType: 'upstream_timeout' });
    expect(client?.status).toEqual({ code: ERROR, message: 'upstream_timeout' });
    expect(client?.attributes['error.type']).toBe('upstream_timeout');
    expect(client?.attributes['http.response.status_code']).toBeUndefined();
    expect(server?.attributes['error.type']).toBe('upstream_timeout');
  });

  it('a method the conventions do not know is _OTHER, its own in method_original, its spans named HTTP', () => {
    for (const method of ['PROPFIND', 'get', 'QUERY', '_OTHER']) {
      const [server, client] = wakeOf({ method });
      expect(server?.name).toBe('HTTP api');
      expect(server?.attributes['http.request.method']).toBe('_OTHER');
      expect(server?.attributes['http.request.method_original']).toBe(method);
      expect(client?.name).toBe('HTTP');
      expect(client?.attributes['http.request.method']).toBe('_OTHER');
      expect(client?.attributes['http.request.method_original']).toBe(method);
    }
  });

  it('every method the conventions know is its own, with no method_original', () => {
    for (const method of ['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE']) {
      const [server, client] = wakeOf({ method });
      expect(server?.name).toBe(`${method} api`);
      expect(server?.attributes['http.request.method']).toBe(method);
      expect(server?.attributes['http.request.method_original']).toBeUndefined();
      expect(client?.name).toBe(method);
      expect(client?.attributes['http.request.method_original']).toBeUndefined();
    }
  });

  it('a request that matched no route: named by its method alone, with no http.route', () => {
    for (const route of ['none', '']) {
      for (const [method, name] of [
        ['GET', 'GET'],
        ['PROPFIND', 'HTTP'],
      ]) {
        const [server, client] = wakeOf({ route, method, status: 404, upstreamAtMs: -1, errorType: 'not_found' });
        expect(client).toBeUndefined();
        expect(server?.name).toBe(name);
        expect(server?.attributes).not.toHaveProperty('http.route');
        expect(server?.attributes['wakegate.environment']).toBe('production');
      }
    }
  });

  it("a route the configuration names 'none' keeps its name and http.route", () => {
    const named = [
      { name: 'none', rate_limit: 'default', origins: { production: 'http://origin:8080' } },
    ] as unknown as Parameters<typeof wakeSpans>[0]['routes'];
    const [server] = wakeOf({ route: 'none' }, named);
    expect(server?.name).toBe('GET none');
    expect(server?.attributes['http.route']).toBe('none');
  });
});

describe("a route's shared attributes (encoded once, kept per route, environment and method)", () => {
  it("every span carries its own request's values, whichever shapes came before it", () => {
    const origin: Record<string, Record<string, [string, number]>> = {
      api: { production: ['origin', 8080], staging: ['st.example', 443] },
      ünï: { production: ['::1', 9] },
    };
    const bucket: Record<string, string> = { api: 'default', ünï: 'tight' };
    const KNOWN = ['GET', 'POST', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE'];
    const input = wakeInput.chain((i) =>
      // Other known methods, and ones the conventions do not know (a client picks them: one _OTHER shape).
      fc.constantFrom(i.method, 'OPTIONS', 'TRACE', 'FOO', 'get', 'PROPFIND').map((method) => ({ ...i, method })),
    );
    fc.assert(
      fc.property(fc.array(input, { minLength: 1, maxLength: 30 }), (items) => {
        // One builder for all of a run's batches, as the gateway has: what it keeps outlives a batch.
        const ofWake = wakeSpans({ routes }, fixedIds(7));
        for (const batch of [items, [...items].reverse()]) {
          const w = new OtlpWriter({ serviceName: 'wakegate', scopeName: 'wakegate', scopeVersion: '1' });
          w.start();
          for (const i of batch) ofWake(i, w);
          const spans = decodeSpans(w.finish());
          let at = 0;
          for (const i of batch) {
            const server = spans[at++];
            // Known to the conventions, or _OTHER (named HTTP, the client's own in method_original).
            const known = KNOWN.includes(i.method);
            const named = known ? i.method : 'HTTP';
            const routed = i.route !== 'none' && i.route !== '';
            expect(server?.name).toBe(routed ? `${named} ${i.route}` : named);
            expect(server?.attributes['http.route']).toBe(routed ? i.route : undefined);
            expect(server?.attributes['http.request.method_original']).toBe(known ? undefined : i.method);
            expect(server?.attributes).toMatchObject({
              'http.request.method': known ? i.method : '_OTHER',
              'network.protocol.version': i.protocol === 'h2' ? '2' : '1.1',
              'wakegate.environment': i.environment,
              'url.path': i.path,
              'wakegate.wake_id': i.wakeId,
            });
            const outcome = i.upstreamAtMs >= 0 ? 'admitted' : 'refused';
            expect(server?.events[0]?.attributes['wakegate.admission.outcome']).toBe(outcome);
            expect(server?.events[0]?.attributes['wakegate.rate_limit']).toBe(bucket[i.route]);
            if (i.upstreamAtMs < 0) continue;
            const client = spans[at++];
            const o = origin[i.route]?.[i.environment];
            expect(client?.name).toBe(named);
            expect(client?.attributes['http.request.method']).toBe(known ? i.method : '_OTHER');
            expect(client?.attributes['http.request.method_original']).toBe(known ? undefined : i.method);
            expect(client?.attributes['server.address']).toBe(o?.[0]);
            expect(client?.attributes['server.port']).toBe(o?.[1]);
          }
          expect(at).toBe(spans.length);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('past the bound on kept shapes (4,096), it begins again and every span still carries its own values', () => {
    const ofWake = wakeSpans({ routes }, fixedIds(3));
    const base = fc.sample(wakeInput, { numRuns: 1, seed: 1 })[0] as SpanInput;
    const envs = Array.from({ length: 4_200 }, (_, i) => `env_${i}`);
    const w = new OtlpWriter({ serviceName: 'wakegate', scopeName: 'wakegate', scopeVersion: '1' });
    w.start();
    const order = [...envs, envs[0] as string, envs[4_199] as string, envs[2_000] as string];
    for (const environment of order) ofWake({ ...base, route: 'api', method: 'GET', upstreamAtMs: -1, environment }, w);
    const spans = decodeSpans(w.finish());
    expect(spans.map((s) => s.attributes['wakegate.environment'])).toEqual(order);
  });

  it('a block of attributes decodes as the same attributes written one by one, on a span and on an event', () => {
    const list = [
      [otlpKey('a.b'), 'x'],
      [otlpKey('n'), 443],
      [otlpKey('d'), 1.5],
      [otlpKey('t'), true],
      [otlpKey('ü'), '東'.repeat(50)],
    ] as const;
    const block = otlpAttrs(list);
    const [ours, theirs] = both({ serviceName: 's', scopeName: 'wakegate', scopeVersion: '' }, (w) => {
      w.begin(rootStart({ startMs: 1, endMs: 2 }));
      w.str(otlpKey('before'), 'b');
      w.attrs(block);
      w.event('e', 1.5);
      w.attrs(block);
      w.num(otlpKey('after'), 1);
      w.endEvent();
      w.end('');
    });
    expect(ours).toEqual(theirs);
  });
});

describe('wakeTraceOf (the link of a webhook span)', () => {
  const event = (w: Record<string, unknown>) => JSON.stringify({ type: 'wake.error', data: { wake: w } });
  it('links to the wake its event names, when both ids are ids', () => {
    expect(wakeTraceOf(event({ trace_id: 'ab'.repeat(16), span_id: 'cd'.repeat(8) }))).toEqual({
      traceId: 'ab'.repeat(16),
      spanId: 'cd'.repeat(8),
    });
  });

  it('makes no link of a span id that is not 16 lowercase hex digits (it would be written as bytes)', () => {
    for (const spanId of ['', 'cd'.repeat(4), 'CD'.repeat(8), 'zz'.repeat(8), 'cd'.repeat(9)])
      expect(wakeTraceOf(event({ trace_id: 'ab'.repeat(16), span_id: spanId }))).toBeNull();
  });
});
