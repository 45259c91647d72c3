// Regression tests from a review of time handling (2026-11-27).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { EventTable } from '../../src/store/events.js';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

// Review (time): slo.burn's quiet hour when the clock was far ahead and is put right.
describe('slo.burn after a clock far in the future is corrected', () => {
  let origin: TestServer;
  let t: TestGateway;
  // The host came up with its clock 30 days ahead.
  const clock = new ManualClock(T0 + 30 * DAY);

  beforeAll(async () => {
    origin = await startServer((_req, res) => {
      res.writeHead(500);
      res.end('boom');
    });
    t = await startGateway(
      {
        routes: [
          {
            name: 'api',
            prefix: '/api',
            auth: 'none',
            availability_objective: 0.99,
            origins: { production: origin.url },
          },
        ],
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const burn = async () => {
    for (let i = 0; i < 120; i++) await (await fetch(`${t.url}/api/x`)).arrayBuffer();
    await flushed(t.gw);
    await t.gw.events.flush();
    return (await new EventTable(t.gw.store).list({ type: 'slo.burn' })).filter((e) => e.data.route === 'api');
  };

  it('a burn two hours after the correction is raised: the quiet hour is an hour, not the 30 days the clock was ahead', async () => {
    const first = await burn();
    expect(first).toHaveLength(1);

    // NTP puts the clock right; two hours later the origin fails hard again.
    clock.set(T0);
    clock.set(T0 + 2 * HOUR);
    const after = await burn();
    expect(
      new Set(after.map((e) => e.id)).size,
      'no slo.burn for a 100% failing route: the last alert is "in the future", so the quiet hour lasts 30 days',
    ).toBe(2);
  });
});
