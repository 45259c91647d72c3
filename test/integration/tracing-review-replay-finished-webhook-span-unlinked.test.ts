// Regression tests from a review of tracing (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, type ReceivedSpan, startReceiver } from '../helpers/otlp-receiver.js';
import { type Receiver, startReceiver as startHooks } from '../helpers/receiver.js';

// docs/tracing.md, The spans: a webhook delivery attempt is a CLIENT span "linked to the span of
// the wake that raised its event" (the link "names the wake's trace and span (from its event's
// data)"); src/tracing/webhook-spans.ts wakeTraceOf says it reads them for "wake.error,
// wake.slow, replay.finished". But src/proxy/replay.ts emits replay.finished with
// { wake_id, replay_wake_id, diff } only: no trace_id/span_id, so wakeTraceOf finds none and a
// replay.finished attempt never has a link, though the replay's wake has a trace of its own
// (with tracing on a replay starts a new trace) and its SERVER span was exported.

describe('review tracing: a replay.finished delivery links to the replay', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let hooks: Receiver;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    receiver = await startReceiver();
    hooks = await startHooks();
    t = await startGateway({
      routes: [
        { name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url }, capture: { detail: {} } },
      ],
      webhooks: { allow_insecure_http: true, allow_private_networks: true },
      tracing: { otlp_url: receiver.url, sample_ratio: 1, flush_interval_ms: 20 },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await hooks.close();
    await receiver.close();
    await origin.close();
  });

  it('links the attempt to the replay wake’s span', async () => {
    const reg = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
      url: hooks.url,
      events: ['replay.finished'],
      environment: 'production',
    });
    expect(reg.status).toBe(201);
    const r0 = await fetch(`${t.url}/api/items/1`);
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
    await hooks.waitFor(1, 15_000);
    let hook: ReceivedSpan | undefined;
    let server: ReceivedSpan | undefined;
    for (let i = 0; i < 200 && (hook === undefined || server === undefined); i++) {
      await new Promise((res) => setTimeout(res, 25));
      hook = receiver.spans.find((s) => s.attributes['wakegate.event_type'] === 'replay.finished');
      server = receiver.spans.find((s) => s.kind === 2 && s.attributes['wakegate.wake_id'] === replay_wake_id);
    }
    // The replay's wake was traced and its SERVER span exported.
    expect(server).toBeDefined();
    expect(hook).toBeDefined();
    expect(hook?.links).toEqual([{ traceId: server?.traceId, spanId: server?.spanId }]);
  });
});
