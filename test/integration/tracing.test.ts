import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2once } from '../helpers/h2.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, type ReceivedSpan, startReceiver } from '../helpers/otlp-receiver.js';
import { rawExchange } from '../helpers/raw.js';
import { type Receiver, startReceiver as startHooks } from '../helpers/receiver.js';
import { get, metric, routes, traceOrigin } from '../helpers/tracing.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
/** OTLP's SpanKind values. */
const SERVER = 2;
const CLIENT = 3;

describe('tracing: spans exported over OTLP/HTTP to a collector (threads: 1)', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let t: TestGateway;
  const spansOf = (traceId: string) => receiver.spans.filter((s) => s.traceId === traceId);
  const waitTrace = async (traceId: string, n: number): Promise<ReceivedSpan[]> => {
    for (let i = 0; i < 200 && spansOf(traceId).length < n; i++) await new Promise((r) => setTimeout(r, 25));
    return spansOf(traceId);
  };

  beforeAll(async () => {
    origin = await traceOrigin();
    receiver = await startReceiver();
    t = await startGateway({
      routes: routes(origin.url),
      tracing: {
        otlp_url: receiver.url,
        sample_ratio: 1,
        service_name: 'edge-gw',
        headers: { 'x-collector-token': 'abc' },
        flush_interval_ms: 20,
      },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await receiver.close();
    await origin.close();
  });

  it('starts a trace for a request without traceparent: the origin sees the SERVER span as its parent', async () => {
    const r = await get(`${t.url}/open/items?q=1`, { 'user-agent': 'trace-test/1' });
    expect(r.status).toBe(200);
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(r.seen.traceparent ?? '');
    expect(m).not.toBeNull();
    const [, traceId, spanId] = m as RegExpExecArray;
    const spans = await waitTrace(traceId as string, 2);
    const server = spans.find((s) => s.kind === SERVER) as ReceivedSpan;
    const client = spans.find((s) => s.kind === CLIENT) as ReceivedSpan;
    expect(server.spanId).toBe(spanId);
    expect(server.parentSpanId).toBe('');
    expect(server.name).toBe('GET open');
    expect(server.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.route': 'open',
      'url.path': '/open/items',
      'http.response.status_code': 200,
      'client.address': '127.0.0.1',
      'user_agent.original': 'trace-test/1',
      'network.protocol.version': '1.1',
      'url.scheme': 'http',
      'wakegate.wake_id': r.wakeId,
    });
    expect(server.attributes['error.type']).toBeUndefined();
    expect(server.status.code).toBe(0);
    expect(server.resource['service.name']).toBe('edge-gw');
    expect(server.events.map((e) => e.name)).toEqual(['wakegate.admission']);
    expect(server.events[0]?.attributes).toMatchObject({
      'wakegate.admission.outcome': 'admitted',
      'wakegate.rate_limit': 'default',
    });
    expect(server.endNs).toBeGreaterThan(server.startNs);
    expect(client.parentSpanId).toBe(server.spanId);
    expect(client.attributes).toMatchObject({
      'server.address': '127.0.0.1',
      'server.port': origin.port,
      'http.response.status_code': 200,
      // What was asked of the origin, without the query.
      'url.full': `http://127.0.0.1:${origin.port}/open/items`,
    });
    expect(client.startNs).toBeGreaterThanOrEqual(server.startNs);
    // The export request: protobuf, with the configured headers.
    expect(receiver.requests[0]?.['content-type']).toBe('application/x-protobuf');
    expect(receiver.requests[0]?.['x-collector-token']).toBe('abc');
  });

  it('keeps an incoming trace: the SERVER span is the caller’s child, tracestate passed on', async () => {
    const r = await get(`${t.url}/open/x`, { traceparent: `00-${TRACE}-${PARENT}-01`, tracestate: 'v=1' });
    const m = new RegExp(`^00-${TRACE}-([0-9a-f]{16})-01$`).exec(r.seen.traceparent ?? '');
    expect(m).not.toBeNull();
    expect(m?.[1]).not.toBe(PARENT);
    expect(r.seen.tracestate).toBe('v=1');
    const [server] = (await waitTrace(TRACE, 2)).filter((s) => s.kind === SERVER);
    expect(server?.spanId).toBe(m?.[1]);
    expect(server?.parentSpanId).toBe(PARENT);
  });

  it('an HTTP/1.0 request is said to be one: network.protocol.version 1.0, and its wake http/1.0', async () => {
    const trace = 'c'.repeat(30) + '0a';
    const port = Number(new URL(t.url).port);
    const r = await rawExchange(
      port,
      `GET /open/h10 HTTP/1.0\r\nHost: x\r\ntraceparent: 00-${trace}-${PARENT}-01\r\n\r\n`,
    );
    expect(r.text).toMatch(/^HTTP\/1\.1 200/);
    const [server] = (await waitTrace(trace, 2)).filter((s) => s.kind === SERVER);
    expect(server?.attributes['network.protocol.version']).toBe('1.0');
    await flushed(t.gw);
    const list = await call(t.url, t.admin, 'GET', `/v2/wakes?environment=production&trace_id=${trace}`);
    expect(list.body.data.map((w: { protocol: string }) => w.protocol)).toEqual(['http/1.0']);
  });

  it('stores the trace on the wake: GET /v2/wakes?trace_id= finds it', async () => {
    await flushed(t.gw);
    const list = await call(t.url, t.admin, 'GET', `/v2/wakes?environment=production&trace_id=${TRACE.toUpperCase()}`);
    expect(list.status).toBe(200);
    expect(list.body.data).toHaveLength(1);
    const [w] = list.body.data;
    expect(w.path).toBe('/open/x');
    expect(w.trace_id).toBe(TRACE);
    const server = spansOf(TRACE).find((s) => s.kind === SERVER);
    expect(w.span_id).toBe(server?.spanId);
    expect(server?.attributes['wakegate.wake_id']).toBe(w.id);
    const none = await call(t.url, t.admin, 'GET', `/v2/wakes?environment=production&trace_id=${'b'.repeat(32)}`);
    expect(none.body.data).toHaveLength(0);
    const bad = await call(t.url, t.admin, 'GET', '/v2/wakes?environment=production&trace_id=xyz');
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('trace_id');
  });

  it('sends the trace on a WebSocket upgrade too', async () => {
    const seen: (string | undefined)[] = [];
    const wss = new WebSocketServer({ noServer: true });
    origin.server.on('upgrade', (req, socket, head) => {
      seen.push(req.headers.traceparent as string | undefined);
      wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (m) => ws.send(m)));
    });
    const trace = 'f'.repeat(32);
    const echo = await new Promise<string>((resolve, reject) => {
      const ws = new WebSocket(`${t.url.replace('http:', 'ws:')}/open/socket`, {
        headers: { traceparent: `00-${trace}-${PARENT}-01` },
      });
      ws.on('open', () => ws.send('hi'));
      ws.on('message', (m) => {
        ws.close();
        resolve(m.toString());
      });
      ws.on('error', reject);
    });
    expect(echo).toBe('hi');
    expect(seen[0]).toMatch(new RegExp(`^00-${trace}-[0-9a-f]{16}-01$`));
    // The tunnel's wake is its SERVER span, ended when the tunnel closed.
    const [server] = (await waitTrace(trace, 1)).filter((s) => s.kind === SERVER);
    expect(server?.spanId).toBe(seen[0]?.slice(36, 52));
    wss.close();
  });

  it('ignores an invalid traceparent: a new trace, its tracestate not passed on', async () => {
    const bad = `00-${'0'.repeat(32)}-${PARENT}-01`;
    const r = await get(`${t.url}/open/y`, { traceparent: bad, tracestate: 'v=2' });
    expect(r.seen.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(r.seen.traceparent?.slice(3, 35)).not.toBe('0'.repeat(32));
    expect(r.seen.tracestate).toBeNull();
  });

  it('records a refused request as a SERVER span with the refusal in its admission event', async () => {
    const r = await get(`${t.url}/keyed/z`, { traceparent: `00-${'a'.repeat(32)}-${PARENT}-01` });
    expect(r.status).toBe(401);
    const spans = await waitTrace('a'.repeat(32), 1);
    expect(spans).toHaveLength(1);
    const [server] = spans;
    expect(server?.attributes['http.response.status_code']).toBe(401);
    expect(server?.attributes['error.type']).toBe('authentication_required');
    // A 4xx is the client's error, not the server span's (HTTP semantic conventions).
    expect(server?.status.code).toBe(0);
    expect(server?.events[0]?.attributes).toMatchObject({
      'wakegate.admission.outcome': 'refused',
      'wakegate.admission.refused_reason': 'authentication_required',
    });
  });

  it('counts what was exported', async () => {
    await receiver.waitFor(5);
    expect(await metric(t.opsUrl, 'wakegate_trace_spans_exported_total')).toBeGreaterThanOrEqual(5);
    expect(await metric(t.opsUrl, 'wakegate_trace_spans_dropped_total{reason="queue_full"}')).toBe(0);
  });
});

describe('tracing: head sampling and always_sample', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await traceOrigin();
    receiver = await startReceiver();
    t = await startGateway({
      routes: routes(origin.url),
      tracing: { otlp_url: receiver.url, sample_ratio: 0, always_sample: ['errors'], flush_interval_ms: 20 },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await receiver.close();
    await origin.close();
  });

  it('at ratio 0 exports nothing but the requests that raised wake.error', async () => {
    const ok = await get(`${t.url}/open/fine`);
    // Not sampled: the origin is told so, and still gets the trace.
    expect(ok.seen.traceparent).toMatch(/-00$/);
    const failed = await get(`${t.url}/open/fail`);
    expect(failed.status).toBe(500);
    const spans = await receiver.waitFor(2);
    await new Promise((r) => setTimeout(r, 200));
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([failed.seen.traceparent?.slice(3, 35)]));
    const server = spans.find((s) => s.kind === SERVER);
    expect(server?.attributes['error.type']).toBe('500');
    expect(server?.status.code).toBe(2);
  });
});

describe('tracing: slow requests and webhook attempts', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let hooks: Receiver;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      const wait = req.url?.includes('/slow') ? 120 : 0;
      setTimeout(() => {
        res.writeHead(req.url?.includes('/fail') ? 503 : 200);
        res.end('ok');
      }, wait);
    });
    receiver = await startReceiver();
    hooks = await startHooks();
    t = await startGateway({
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', latency_objective_ms: 50, origins: { production: origin.url } },
      ],
      webhooks: { allow_insecure_http: true, allow_private_networks: true },
      tracing: { otlp_url: receiver.url, sample_ratio: 0, always_sample: ['slow', 'errors'], flush_interval_ms: 20 },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await receiver.close();
    await hooks.close();
    await origin.close();
  });

  it('exports a request slower than its route’s latency objective (wake.slow) at ratio 0', async () => {
    await get(`${t.url}/open/fast`, { traceparent: `00-${'c'.repeat(32)}-${PARENT}-00` });
    await get(`${t.url}/open/slow`, { traceparent: `00-${'d'.repeat(32)}-${PARENT}-00` });
    const spans = await receiver.waitFor(2);
    await new Promise((r) => setTimeout(r, 100));
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set(['d'.repeat(32)]));
  });

  it('a webhook attempt is a CLIENT span linked to the span of the wake that raised its event', async () => {
    const reg = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
      url: hooks.url,
      events: ['wake.error'],
      environment: 'production',
    });
    expect(reg.status).toBe(201);
    const trace = 'e'.repeat(32);
    expect((await get(`${t.url}/open/fail`, { traceparent: `00-${trace}-${PARENT}-01` })).status).toBe(503);
    await hooks.waitFor(1, 15_000);
    let hook: ReceivedSpan | undefined;
    for (let i = 0; i < 200 && hook === undefined; i++) {
      await new Promise((r) => setTimeout(r, 25));
      hook = receiver.spans.find((s) => s.attributes['wakegate.event_type'] === 'wake.error');
    }
    const server = receiver.spans.find((s) => s.traceId === trace && s.kind === SERVER);
    expect(hook?.kind).toBe(CLIENT);
    expect(hook?.name).toBe('POST');
    expect(hook?.attributes).toMatchObject({
      'http.request.method': 'POST',
      'server.address': '127.0.0.1',
      'server.port': hooks.port,
      'http.response.status_code': 200,
      'wakegate.attempt': 1,
    });
    expect(hook?.links).toEqual([{ traceId: trace, spanId: server?.spanId }]);
  });
});

describe('tracing: whose sampled flag is followed (tracing.follow_sampled)', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  /**
   * A gateway (h2c beside HTTP/1.1 on its listener) asked once over each protocol, each
   * request of a trace of its own that says sampled: each trace id with the traceparent
   * the origin got. One gateway at a time: the embedded engine opens one directory a process.
   */
  const ask = async (follow: string, trusted: string[], mark: string): Promise<[string, string][]> => {
    const g = await startGateway({
      server: { http2: 'h2c', trusted_proxies: trusted },
      routes: routes(origin.url),
      tracing: {
        otlp_url: receiver.url,
        sample_ratio: 0,
        follow_sampled: follow,
        always_sample: [],
        flush_interval_ms: 20,
      },
    });
    try {
      const h1 = `${mark}1`.padEnd(32, '0');
      const h2 = `${mark}2`.padEnd(32, '0');
      const r1 = await get(`${g.url}/open/a`, { traceparent: `00-${h1}-${PARENT}-01` });
      const r2 = await h2once(g.url, { ':path': '/open/b', traceparent: `00-${h2}-${PARENT}-01` });
      return [
        [h1, r1.seen.traceparent ?? ''],
        [h2, (JSON.parse(r2.text) as { traceparent: string }).traceparent],
      ];
    } finally {
      // A stop exports what waits.
      await g.cleanup();
    }
  };
  const exported = (traceIds: string[]) => traceIds.filter((id) => receiver.spans.some((s) => s.traceId === id));

  beforeAll(async () => {
    origin = await traceOrigin();
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    await origin.close();
  });

  it('never: a client saying sampled at ratio 0 is not exported, and the origin is told not sampled', async () => {
    const seen = await ask('never', [], 'a');
    for (const [id, tp] of seen) expect(tp).toMatch(new RegExp(`^00-${id}-[0-9a-f]{16}-00$`));
    expect(exported(seen.map(([id]) => id))).toEqual([]);
  });

  it('trusted: followed only from server.trusted_proxies', async () => {
    const untrusted = await ask('trusted', ['10.0.0.0/8'], 'b');
    for (const [, tp] of untrusted) expect(tp).toMatch(/-00$/);
    const fromProxy = await ask('trusted', ['127.0.0.1'], 'c');
    for (const [, tp] of fromProxy) expect(tp).toMatch(/-01$/);
    expect(exported([...untrusted, ...fromProxy].map(([id]) => id))).toEqual(fromProxy.map(([id]) => id));
  });

  it('always (the default): anyone’s is followed', async () => {
    const seen = await ask('always', [], 'd');
    for (const [, tp] of seen) expect(tp).toMatch(/-01$/);
    expect(exported(seen.map(([id]) => id))).toEqual(seen.map(([id]) => id));
  });
});
