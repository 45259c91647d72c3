// Regression tests from a review of the event rules (2026-11-27).
// Defect: slo.burn's "once an hour per route, environment and objective" is held only in
// memory (src/events/slo.ts lastAlert), so a clean restart of a lone gateway within the
// quiet hour raises the same burn again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { EventTable } from '../../src/store/events.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

// 12:59:40: the restart a minute later is in the next clock hour, still within the quiet hour.
const T0 = Date.UTC(2026, 10, 22, 12, 59, 40);

describe('slo.burn across a clean restart', () => {
  let origin: TestServer;
  let t: TestGateway | null = null;
  const clock = new ManualClock(T0);
  const values = {
    routes: [{ name: 'api', prefix: '/api', auth: 'none', availability_objective: 0.99, origins: { production: '' } }],
    webhooks: { allow_insecure_http: true, allow_private_networks: true },
  };
  let receiver: Receiver;

  beforeAll(async () => {
    origin = await startServer((_req, res) => {
      res.writeHead(500);
      res.end('boom');
    });
    (values.routes[0] as { origins: { production: string } }).origins.production = origin.url;
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin.close();
    await receiver.close();
  });

  const burn = async (gw: TestGateway) => {
    for (let i = 0; i < 120; i++) await (await fetch(`${gw.url}/api/x`)).arrayBuffer();
    await flushed(gw.gw);
    await gw.gw.events.flush();
    return (await new EventTable(gw.gw.store).list({ type: 'slo.burn' })).filter((e) => e.data.route === 'api');
  };

  it('raises one slo.burn in the quiet hour, even when the gateway restarts within it', async () => {
    t = await startGateway(values, { clock });
    const ep = await fetch(`${t.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url, events: ['slo.burn'] }),
    });
    expect(ep.status).toBe(201);
    const first = await burn(t);
    await receiver.waitFor(1, 10_000);
    expect(first).toHaveLength(1);
    expect(first[0]?.data).toMatchObject({ route: 'api', objective: { kind: 'availability', target: 0.99 } });
    await t.stop();
    clock.advance(60_000); // a deploy, a minute later: well inside the quiet hour
    t = await startGateway(values, { clock, dir: t.dir, admin: t.admin });
    const after = await burn(t);
    // docs/events.md: "once an hour per route, environment and objective". Raised again by the
    // gateway started again (its rules' memory is not kept), it is the same event: one id,
    // delivered once.
    expect([...new Set(after.map((e) => e.id))]).toEqual(first.map((e) => e.id));
    await new Promise((r) => setTimeout(r, 2000));
    expect(receiver.got.map((g) => JSON.parse(g.body).id)).toEqual(first.map((e) => e.id));
  });
});
