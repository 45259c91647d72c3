import http, { type ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, type ReceivedSpan, startReceiver } from '../helpers/otlp-receiver.js';

// What a SERVER span says of a request that got no answer (its client went away first:
// the wake's 499, which is never sent) and of one admitted and then refused before it
// went upstream (its body held a gateway key, or was a compression bomb), through the
// real listener and a real OTLP/HTTP receiver on loopback.

const PARENT = '00f067aa0ba902b7';
const SERVER = 2;
const CLIENT = 3;
const tp = (trace: string) => `00-${trace}-${PARENT}-01`;

describe('tracing: a request with no answer, and one refused after admission', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let t: TestGateway;
  /** Answers the origin holds (paths with /hold), and how many it has been sent. */
  const held: ServerResponse[] = [];
  let arrived = 0;
  const spansOf = (trace: string) => receiver.spans.filter((s) => s.traceId === trace);
  const waitTrace = async (trace: string, n: number): Promise<ReceivedSpan[]> => {
    for (let i = 0; i < 400 && spansOf(trace).length < n; i++) await new Promise((r) => setTimeout(r, 25));
    return spansOf(trace);
  };
  const until = async (ok: () => boolean) => {
    for (let i = 0; i < 400 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
    expect(ok()).toBe(true);
  };
  /** A request whose client goes away once `leave` resolves (it never reads an answer). */
  const abandoned = (path: string, trace: string, leave: Promise<unknown>) => {
    const req = http.request(`${t.url}${path}`, { agent: false, headers: { traceparent: tp(trace) } });
    req.on('error', () => {});
    req.end();
    void leave.then(() => req.destroy());
  };
  const release = () => {
    for (const res of held.splice(0)) if (!res.destroyed) res.end('late');
  };

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      arrived++;
      if (req.url?.includes('/hold')) {
        held.push(res);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
    receiver = await startReceiver();
    t = await startGateway({
      // One connection to the origin: a second request waits for it (queue_timeout_ms).
      server: { upstream_connections: 1 },
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', queue_timeout_ms: 20_000, origins: { production: origin.url } },
      ],
      tracing: { otlp_url: receiver.url, sample_ratio: 1, flush_interval_ms: 20 },
    });
  });
  // What a test left held (it failed before letting go) never holds the next one's connection.
  afterEach(() => release());
  afterAll(async () => {
    await t.cleanup();
    await receiver.close();
    await origin.close();
  });

  it('a client gone while its request waited for a connection to the origin: no status code, error.type says why', async () => {
    const holder = 'a1'.repeat(16);
    const waiter = 'a2'.repeat(16);
    abandoned('/open/hold/1', holder, waitTrace(holder, 2));
    await until(() => held.length === 1);
    // The second waits for the one connection, and its client leaves before any answer.
    abandoned('/open/waits', waiter, new Promise((r) => setTimeout(r, 150)));
    const [server] = await waitTrace(waiter, 1);
    expect(server?.kind).toBe(SERVER);
    // No answer was sent: no http.response.status_code (0 or 499 are not statuses a client got).
    expect(server?.attributes['http.response.status_code']).toBeUndefined();
    expect(server?.attributes['error.type']).toBe('client_closed_request');
    // A request that failed without an answer is an error (HTTP conventions: status Error, with error.type).
    expect(server?.status).toEqual({ code: 2, message: 'client_closed_request' });
    expect(spansOf(waiter).filter((s) => s.kind === CLIENT)).toEqual([]);
    release();
    await waitTrace(holder, 2);
  });

  it('a client gone while the origin had not answered: neither span has a status code', async () => {
    const trace = 'b1'.repeat(16);
    const before = arrived;
    abandoned(
      '/open/hold/2',
      trace,
      until(() => arrived > before && held.length === 1),
    );
    const spans = await waitTrace(trace, 2);
    const server = spans.find((s) => s.kind === SERVER);
    const client = spans.find((s) => s.kind === CLIENT);
    expect(server?.attributes['http.response.status_code']).toBeUndefined();
    expect(server?.attributes['error.type']).toBe('client_closed_request');
    expect(server?.status.code).toBe(2);
    expect(server?.events[0]?.attributes['wakegate.admission.outcome']).toBe('admitted');
    // The gateway let go of the origin's request because its own client went: a cancellation
    // by the caller, not the origin's error; no status came from it.
    expect(client?.attributes['http.response.status_code']).toBeUndefined();
    expect(client?.attributes['error.type']).toBeUndefined();
    expect(client?.status.code).toBe(0);
    release();
  });

  it('a request admitted, then refused for a gateway key in its body: admitted, then refused, in that order', async () => {
    const trace = 'c1'.repeat(16);
    const r = await fetch(`${t.url}/open/post`, {
      method: 'POST',
      headers: { traceparent: tp(trace), 'content-type': 'text/plain' },
      body: `token=${t.admin}`,
    });
    expect(r.status).toBe(400);
    const [server] = await waitTrace(trace, 1);
    expect(spansOf(trace)).toHaveLength(1);
    expect(server?.attributes['http.response.status_code']).toBe(400);
    expect(server?.attributes['error.type']).toBe('invalid_request');
    expect(server?.events.map((e) => e.name)).toEqual(['wakegate.admission', 'wakegate.refused']);
    expect(server?.events[0]?.attributes['wakegate.admission.outcome']).toBe('admitted');
    expect(server?.events[0]?.attributes['wakegate.admission.refused_reason']).toBeUndefined();
    expect(server?.events[1]?.attributes).toEqual({ 'wakegate.refused_reason': 'invalid_request' });
  });

  it('a request admitted, then refused as a compression bomb (413): admitted, then refused', async () => {
    const trace = 'c2'.repeat(16);
    const r = await fetch(`${t.url}/open/post`, {
      method: 'POST',
      headers: { traceparent: tp(trace), 'content-type': 'text/plain', 'content-encoding': 'gzip' },
      body: gzipSync(Buffer.alloc(4 * 1024 * 1024)),
    });
    expect(r.status).toBe(413);
    const [server] = await waitTrace(trace, 1);
    expect(server?.attributes['http.response.status_code']).toBe(413);
    expect(server?.attributes['error.type']).toBe('payload_too_large');
    expect(server?.events[0]?.attributes['wakegate.admission.outcome']).toBe('admitted');
    expect(server?.events[1]?.attributes).toEqual({ 'wakegate.refused_reason': 'payload_too_large' });
  });

  it('a client gone while its admitted request waited for a connection: admitted, not refused', async () => {
    const holder = 'd1'.repeat(16);
    const waiter = 'd2'.repeat(16);
    abandoned('/open/hold/3', holder, waitTrace(holder, 2));
    await until(() => held.length === 1);
    abandoned('/open/waits', waiter, new Promise((r) => setTimeout(r, 150)));
    const [server] = await waitTrace(waiter, 1);
    expect(server?.events.map((e) => e.name)).toEqual(['wakegate.admission']);
    expect(server?.events[0]?.attributes['wakegate.admission.outcome']).toBe('admitted');
    release();
    await waitTrace(holder, 2);
  });

  it('a request refused by admission itself still says refused, and why', async () => {
    const trace = 'e1'.repeat(16);
    const r = await fetch(`${t.url}/nowhere`, { headers: { traceparent: tp(trace) } });
    expect(r.status).toBe(404);
    const [server] = await waitTrace(trace, 1);
    expect(server?.attributes['http.response.status_code']).toBe(404);
    expect(server?.events.map((e) => e.name)).toEqual(['wakegate.admission']);
    expect(server?.events[0]?.attributes).toMatchObject({
      'wakegate.admission.outcome': 'refused',
      'wakegate.admission.refused_reason': 'resource_missing',
    });
  });
});
