// Regression tests from a review of the event rules (2026-11-27).
// Defect (amplification): a webhooks:write key can register an endpoint that is a route of
// the gateway itself (in production the gateway's own https name is global unicast, so
// registration takes it; here allow_private_networks stands in for that). Each delivery of a
// wake.error to it is a request that fails again, a new 5xx wake, a new wake.error, a new
// delivery... (and each failed attempt is retried 7 times, each retry one more event): one
// request from outside turns into an endless, growing stream of events and deliveries,
// bounded only by the queue's shedding. src/events/wake-rules.ts:19 raises wake.error for
// every 5xx wake, with no regard to the request being the gateway's own webhook delivery
// (its x-service-delivery-id / user-agent), and src/webhooks/endpoints.ts create() does not
// refuse the gateway's own listeners.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWN_DELIVERY_AGENT } from '../../src/delivery-mark.js';
import { EventTable } from '../../src/store/events.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

describe('a webhook endpoint on the gateway itself', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(500);
      res.end('boom');
    });
    t = await startGateway({
      routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
      webhooks: { allow_insecure_http: true, allow_private_networks: true, timeout_ms: 1000 },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('one failing request raises a bounded number of events, not an endless loop', async () => {
    const r = await fetch(`${t.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${t.url}/api/hook`, events: ['wake.error'] }),
    });
    expect(r.status).toBe(201);
    await (await fetch(`${t.url}/api/once`)).arrayBuffer(); // the one request from outside
    await new Promise((res) => setTimeout(res, 3000));
    await t.gw.events.flush();
    const n = (await new EventTable(t.gw.store).list({ type: 'wake.error' })).length;
    // One outside request, one event (its delivery may fail and be retried, but a delivery
    // is no new fact about the origin). Today: one more event per delivery attempt, forever.
    expect(n, `${n} wake.error events in 3 s from one request`).toBeLessThanOrEqual(2);
    // The deliveries' own wakes are kept (each a 500 the origin answered), and say whose they are.
    const own = await t.gw.wakes.list({ environment: 'production', pathPattern: '^/api/hook$' }, 10, null);
    expect(own.rows.length).toBeGreaterThan(0);
    expect(own.rows.every((w) => w.user_agent === OWN_DELIVERY_AGENT)).toBe(true);
  });

  it("a client naming itself the gateway's delivery, without a valid mark, still raises wake.error", async () => {
    const before = (await new EventTable(t.gw.store).list({ type: 'wake.error' })).length;
    const spoofs: Record<string, string>[] = [
      { 'user-agent': 'wakegate-webhooks/1' },
      {
        'user-agent': 'wakegate-webhooks/1',
        'x-service-delivery-id': 'dlv_x',
        'x-wakegate-mark': `${Math.floor(Date.now() / 1000)}.${'0'.repeat(32)}`,
      },
      { 'user-agent': OWN_DELIVERY_AGENT },
    ];
    for (const h of spoofs) await (await fetch(`${t.url}/api/spoof`, { headers: h })).arrayBuffer();
    await t.gw.events.flush();
    await flushed(t.gw);
    const after = (await new EventTable(t.gw.store).list({ type: 'wake.error' })).length;
    expect(after - before).toBeGreaterThanOrEqual(3);
    const wakes = await t.gw.wakes.list({ environment: 'production', pathPattern: '^/api/spoof$' }, 10, null);
    expect(wakes.rows.map((w) => w.user_agent).sort()).toEqual(
      ['wakegate-webhooks/1', 'wakegate-webhooks/1', `${OWN_DELIVERY_AGENT} (unverified)`].sort(),
    );
  });
});
