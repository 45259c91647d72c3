// Regression tests from a review of tracing (2026-11-28): a webhook attempt's CLIENT span exports the receiver URL's path.
// docs/events.md and docs/webhooks.md: a receiver URL's "path, query, fragment and any
// credentials ... are often the receiver's secret" (https://hooks.slack.com/services/T0/B0/XXXX),
// so webhook.disabled names it as https://hooks.slack.com/… only. OTel semconv url.full:
// "Sensitive content provided in url.full SHOULD be scrubbed when instrumentations can
// identify it". src/tracing/webhook-spans.ts writes `${u.origin}${u.pathname}`: the Slack /
// Discord token goes to the trace collector (often a third party) in url.full.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, type ReceivedSpan, startReceiver } from '../helpers/otlp-receiver.js';
import { type Receiver, startReceiver as startHooks } from '../helpers/receiver.js';

const SECRET = 'XoXbSeCrEtWebhookToken123';

describe('review tracing: webhook span url.full and the receiver URL secret path', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let hooks: Receiver;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(503);
      res.end('down');
    });
    receiver = await startReceiver();
    hooks = await startHooks();
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      webhooks: { allow_insecure_http: true, allow_private_networks: true },
      tracing: { otlp_url: receiver.url, sample_ratio: 1, flush_interval_ms: 20 },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await receiver.close();
    await hooks.close();
    await origin.close();
  });

  it('does not export the Slack-style token in the receiver URL path', async () => {
    const reg = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
      url: `${hooks.url}/services/T0000/B0000/${SECRET}`,
      events: ['wake.error'],
      environment: 'production',
    });
    expect(reg.status).toBe(201);
    const r = await fetch(`${t.url}/open/fail`);
    await r.arrayBuffer();
    expect(r.status).toBe(503);
    await hooks.waitFor(1, 15_000);
    let hook: ReceivedSpan | undefined;
    for (let i = 0; i < 400 && hook === undefined; i++) {
      await new Promise((res) => setTimeout(res, 25));
      hook = receiver.spans.find((s) => s.attributes['wakegate.event_type'] === 'wake.error');
    }
    expect(hook).toBeDefined();
    // The receiver is named (server.address, server.port), its secret is not.
    expect(hook?.attributes['server.port']).toBe(hooks.port);
    expect(JSON.stringify({ a: hook?.attributes, s: hook?.status, e: hook?.events })).not.toContain(SECRET);
  });
});
