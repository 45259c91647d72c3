// Regression tests from a review of webhook delivery (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

/**
 * Deliveries at once were bounded by `max_concurrency` across every environment: a
 * sandbox's receivers that accept and never answer held every place until their timeout,
 * and production's deliveries waited behind them. Each environment has its own places,
 * as replays do.
 */
describe("a sandbox's hung receivers and production's deliveries", () => {
  let hung: Receiver;
  let fast: Receiver;
  let t: TestGateway;
  beforeAll(async () => {
    hung = await startReceiver();
    hung.answer = () => {}; // read, never answered
    fast = await startReceiver();
    t = await startGateway({
      webhooks: {
        allow_insecure_http: true,
        allow_private_networks: true,
        max_concurrency: 2,
        max_per_endpoint: 2,
        timeout_ms: 20_000,
      },
    });
  });
  afterAll(async () => {
    await hung.close();
    await t.cleanup();
    await fast.close();
  });

  it('never hold production’s places', async () => {
    const sb = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
      url: hung.url,
      events: ['*'],
      environment: 'sandbox',
    });
    expect(sb.status, JSON.stringify(sb.body)).toBe(201);
    for (let i = 0; i < 3; i++) {
      const s = await call(t.url, t.admin, 'POST', `/v2/webhooks/endpoints/${sb.body.id}/test?environment=sandbox`);
      expect(s.status, JSON.stringify(s.body)).toBeLessThan(300);
    }
    // Both places of the sandbox taken by attempts that will hang for 20 s.
    await hung.waitFor(2, 5000);
    const prod = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', { url: fast.url, events: ['*'] });
    expect(prod.status).toBe(201);
    const started = Date.now();
    await call(t.url, t.admin, 'POST', `/v2/webhooks/endpoints/${prod.body.id}/test`);
    await fast.waitFor(1, 5000);
    expect(Date.now() - started).toBeLessThan(5000);
    // The sandbox's third waits for one of its own places.
    expect(hung.got).toHaveLength(2);
  }, 30_000);
});
