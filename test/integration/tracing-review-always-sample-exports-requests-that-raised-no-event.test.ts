// Regression tests from a review of tracing (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { OWN_DELIVERY_AGENT } from '../../src/delivery-mark.js';
import { EventTable } from '../../src/store/events.js';
import { bearer, call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, startReceiver } from '../helpers/otlp-receiver.js';

// docs/tracing.md, Sampling: "always_sample: [errors, slow] adds every request that raised
// wake.error (a 5xx) or wake.slow (slower than its route's latency_objective_ms)".
// src/events/wake-rules.ts never raises wake.slow for a tunnel (status 101: "its latency is
// its lifetime"), but src/tracing/span-input.ts spanSelector compares latency_ms with the
// objective without that exception: every tunnel held open longer than the objective is
// exported whatever sample_ratio says (the default config has always_sample: [errors, slow]).
// Likewise wake-rules.ts raises no wake.error for the gateway's own webhook delivery come back
// to one of its routes (user_agent OWN_DELIVERY_AGENT), but spanSelector exports its 5xx.
// The selector re-implements the rules' tests without their exceptions.

const PARENT = '00f067aa0ba902b7';
const TRACE = '7a'.repeat(16);

describe('review tracing: a tunnel is not a slow request', () => {
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
        { name: 'open', prefix: '/open', auth: 'none', latency_objective_ms: 1, origins: { production: origin.url } },
      ],
      tracing: { otlp_url: receiver.url, sample_ratio: 0, always_sample: ['slow'], flush_interval_ms: 20 },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    wss.close();
    await receiver.close();
    await origin.close();
  });

  it('does not export a tunnel (101) held open past the objective, which raised no wake.slow', async () => {
    // A tunnel held for 30 echoed round trips (its wake's latency is its lifetime), then closed.
    await new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(`${t.url.replace('http:', 'ws:')}/open/socket`, {
        headers: { traceparent: `00-${TRACE}-${PARENT}-00` },
      });
      let n = 0;
      ws.on('open', () => ws.send('0'));
      ws.on('message', () => {
        if (++n < 30) ws.send(String(n));
        else ws.close();
      });
      ws.on('close', () => resolve());
      ws.on('error', reject);
    });
    // The tunnel's wake is recorded (its span, if any, was chosen then).
    let wake: { status: number; latency_ms: number } | undefined;
    for (let i = 0; i < 100 && wake === undefined; i++) {
      await flushed(t.gw);
      const list = await call(t.url, t.admin, 'GET', `/v2/wakes?environment=production&trace_id=${TRACE}`);
      wake = list.body.data[0];
    }
    expect(wake?.status).toBe(101);
    // Precondition: its latency is past the objective (1 ms), as any tunnel's is.
    expect(wake?.latency_ms).toBeGreaterThan(1);
    // A stop exports everything that waits: after it, the receiver holds every span chosen.
    await t.stop();
    expect(receiver.spans.filter((s) => s.traceId === TRACE)).toEqual([]);
  });
});

describe("review tracing: the gateway's own webhook delivery is no wake.error", () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(500);
      res.end('boom');
    });
    receiver = await startReceiver();
    t = await startGateway({
      routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
      webhooks: { allow_insecure_http: true, allow_private_networks: true, timeout_ms: 1000 },
      tracing: { otlp_url: receiver.url, sample_ratio: 0, always_sample: ['errors'], flush_interval_ms: 20 },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await receiver.close();
    await origin.close();
  });

  it('does not export the 5xx of a delivery that raised no wake.error', async () => {
    const r = await fetch(`${t.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${t.url}/api/hook`, events: ['wake.error'] }),
    });
    expect(r.status).toBe(201);
    // One request from outside: its 500 raises wake.error (and is exported, rightly).
    await (await fetch(`${t.url}/api/once`)).arrayBuffer();
    // Its delivery comes back to /api/hook, answered 500 too: a wake of the gateway's own delivery.
    let own: { user_agent: string; trace_id?: string }[] = [];
    for (let i = 0; i < 200 && own.length === 0; i++) {
      await flushed(t.gw);
      own = (await t.gw.wakes.list({ environment: 'production', pathPattern: '^/api/hook$' }, 10, null)).rows;
    }
    expect(own.length).toBeGreaterThan(0);
    expect(own[0]?.user_agent).toBe(OWN_DELIVERY_AGENT);
    await t.gw.events.flush();
    // Precondition: only the outside request raised wake.error (wake-rules.ts excepts deliveries).
    const raised = await new EventTable(t.gw.store).list({ type: 'wake.error' });
    expect(raised).toHaveLength(1);
    await t.stop();
    const exported = receiver.spans.filter((s) => s.kind === 2 && s.attributes['url.path'] === '/api/hook');
    expect(exported.map((s) => s.attributes['user_agent.original'])).toEqual([]);
  });
});
