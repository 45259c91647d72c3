// Regression tests from a review of this session's changes (2026-11-27).
// Review 2026-11-27 (delivery mark, 4553706).
// Defect: the mark of the gateway's own deliveries (x-wakegate-mark, with
// x-service-delivery-id) is sent to EVERY webhook receiver, and it is bound to nothing of
// the request it rides on: not the endpoint's URL, not the path, not the body, not a
// single use. Whoever receives one delivery (a third-party receiver, a log of it) can, for
// 5 minutes (MARK_WINDOW_S), send any number of requests to any route of any environment
// with user-agent wakegate-webhooks/1 and that pair of headers: their wakes are recorded as
// "this gateway's delivery" and raise no wake.error (nor wake.slow), so an attacker's
// failing traffic is invisible to every wake.error subscriber.
// Cause: src/delivery-mark.ts:33-47 (isOwnDelivery checks only HMAC(deliveryId.t) and
// |now-t| <= 300 s), used by src/capture/recorder.ts:261 and src/events/wake-rules.ts:20.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWN_DELIVERY_AGENT } from '../../src/delivery-mark.js';
import { EventTable } from '../../src/store/events.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

describe('a mark captured by a webhook receiver', () => {
  let origin: TestServer;
  let receiver: Receiver;
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
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
    await receiver.close();
  });

  it('does not silence wake.error for other requests replaying it', async () => {
    const r = await fetch(`${t.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      // An ordinary outside receiver (not the gateway itself).
      body: JSON.stringify({ url: `${receiver.url}/hook`, events: ['wake.error'] }),
    });
    expect(r.status).toBe(201);
    await (await fetch(`${t.url}/api/first`)).arrayBuffer();
    const [d] = await receiver.waitFor(1, 15_000);
    const mark = d?.headers['x-wakegate-mark'] as string;
    const deliveryId = d?.headers['x-service-delivery-id'] as string;
    expect(mark).toMatch(/^\d+\.[0-9a-f]{32}$/);

    const before = (await new EventTable(t.gw.store).list({ type: 'wake.error' })).length;
    // The receiver (or anyone who saw the delivery) replays the pair on its own failing traffic.
    for (let i = 0; i < 5; i++) {
      const a = await fetch(`${t.url}/api/attack/${i}`, {
        method: 'POST',
        headers: {
          'user-agent': 'wakegate-webhooks/1',
          'x-service-delivery-id': deliveryId,
          'x-wakegate-mark': mark,
          'content-type': 'text/plain',
        },
        body: `payload ${i}`,
      });
      await a.arrayBuffer();
      expect(a.status).toBe(500);
    }
    await flushed(t.gw);
    await t.gw.events.flush();
    const after = (await new EventTable(t.gw.store).list({ type: 'wake.error' })).length;
    const wakes = await t.gw.wakes.list({ environment: 'production', pathPattern: '^/api/attack/' }, 10, null);
    const ownLabelled = wakes.rows.filter((w) => w.user_agent === OWN_DELIVERY_AGENT).length;
    // None of these requests is a delivery of this gateway: none may pass as one.
    expect(ownLabelled, `${ownLabelled} of 5 attacker requests recorded as the gateway's own delivery`).toBe(0);
    expect(after - before, 'wake.error raised for the attacker requests').toBeGreaterThanOrEqual(5);
  }, 40_000);
});
