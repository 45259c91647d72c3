// Regression tests from a review of tracing (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, type ReceivedSpan, startReceiver } from '../helpers/otlp-receiver.js';

// docs/tracing.md, The spans: the upstream attempt (CLIENT, child of the SERVER span) carries
// `url.full` (the origin's URL and the path sent to it, without its query); "WebSocket
// upgrades carry the same traceparent". src/tracing/spans.ts writes url.full only when
// SpanInput.upstreamPath is set, and src/proxy/websocket.ts computes the upstream path
// (upstreamPath(route, origin, ...)) without storing it in x.upstreamPath as handler.ts does:
// a tunnel's CLIENT span says which server it went to, never which URL. src/proxy/replay.ts
// does the same for a replay (`const path = upstreamPath(...)`, never x.upstreamPath).

const PARENT = '00f067aa0ba902b7';
const TRACE = '5c'.repeat(16);
const CLIENT = 3;

describe('review tracing: the CLIENT span of a tunnel or a replay', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let t: TestGateway;
  let wss: WebSocketServer;

  beforeAll(async () => {
    wss = new WebSocketServer({ noServer: true });
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(200);
      res.end('ok');
    });
    origin.server.on('upgrade', (req, socket, head) => {
      wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (m) => ws.send(m)));
    });
    receiver = await startReceiver();
    t = await startGateway({
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        { name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url }, capture: { detail: {} } },
      ],
      tracing: { otlp_url: receiver.url, sample_ratio: 1, flush_interval_ms: 20 },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    wss.close();
    await receiver.close();
    await origin.close();
  });

  it('a replay: its CLIENT span has url.full', async () => {
    const r0 = await fetch(`${t.url}/api/items/1?x=1`);
    await r0.arrayBuffer();
    const source = r0.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const r = await fetch(`${t.url}/v2/wakes/${source}/replay`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: '{}',
    });
    expect(r.status).toBe(202);
    const { replay_wake_id } = (await r.json()) as { replay_wake_id: string };
    let server: ReceivedSpan | undefined;
    for (let i = 0; i < 200 && server === undefined; i++) {
      await new Promise((res) => setTimeout(res, 25));
      server = receiver.spans.find((s) => s.attributes['wakegate.wake_id'] === replay_wake_id);
    }
    expect(server).toBeDefined();
    let client: ReceivedSpan | undefined;
    for (let i = 0; i < 200 && client === undefined; i++) {
      client = receiver.spans.find((s) => s.kind === CLIENT && s.parentSpanId === server?.spanId);
      if (client === undefined) await new Promise((res) => setTimeout(res, 25));
    }
    expect(client?.attributes['http.response.status_code']).toBe(200);
    expect(client?.attributes['url.full']).toBe(`http://127.0.0.1:${origin.port}/api/items/1`);
  });

  it('a WebSocket upgrade: its CLIENT span has url.full, the origin and the path the upgrade was sent to (without its query)', async () => {
    await new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(`${t.url.replace('http:', 'ws:')}/open/socket?token=abc`, {
        headers: { traceparent: `00-${TRACE}-${PARENT}-01` },
      });
      ws.on('open', () => ws.send('hi'));
      ws.on('message', () => ws.close());
      ws.on('close', () => resolve());
      ws.on('error', reject);
    });
    // A stop exports what waits.
    await t.stop();
    const client = receiver.spans.find((s) => s.traceId === TRACE && s.kind === CLIENT) as ReceivedSpan;
    expect(client).toBeDefined();
    expect(client.attributes['http.response.status_code']).toBe(101);
    expect(client.attributes['url.full']).toBe(`http://127.0.0.1:${origin.port}/open/socket`);
  });
});
