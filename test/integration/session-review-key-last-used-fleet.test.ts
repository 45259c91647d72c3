// Regression tests from a review of this session's changes (2026-11-28): last_used_at after a clock step (88d0950), seen from a fleet.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lastUse } from '../../src/auth/keys-service.js';
import { ManualClock } from '../../src/clock.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const DAY = 86_400_000;

/**
 * lastUse: when storage holds a use later than this instance's now, the instance's own
 * memory wins whatever its age. Storage is shared by a fleet: another instance whose clock
 * runs a few seconds ahead (or the hour of the commit's own scenario) writes its uses "ahead"
 * of this one's now, and this instance then shows its own last use, a day old, for a key the
 * fleet is using this very second. The rotation guide says to watch last_used_at "until it
 * stops moving" before revoking: here it has stopped a day ago on this instance, though the
 * key is in use. A stored use later than now was before now (the docs' own reading: "shown as
 * now"); it is later than any older use this instance holds.
 */
describe('last_used_at when another instance of the fleet stamped a use ahead of this one', () => {
  it('lastUse: a stored use ahead of now beats a day-old use in memory (shown as now)', () => {
    const now = T0 + DAY;
    expect(lastUse(T0, now + 5_000, now)).toBe(now);
  });

  let origin: TestServer;
  let t: TestGateway;
  const clock = new ManualClock(T0);
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  beforeAll(async () => {
    origin = await echoOrigin('prod');
    t = await startGateway(
      {
        routes: [
          {
            name: 'payments',
            prefix: '/v2/payments',
            scopes: { read: 'payments:read', write: 'payments:write' },
            origins: { production: origin.url, sandbox: origin.url },
          },
        ],
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it('through the API: a key used a moment ago elsewhere in the fleet is not shown as last used a day ago', async () => {
    const created = await api('POST', '/v2/api-keys', {
      label: 'fleet',
      environment: 'production',
      scopes: ['payments:read'],
    });
    expect(created.status).toBe(201);
    const k = (await created.json()) as { id: string; secret: string };
    // This instance used it a day ago.
    expect((await fetch(`${t.url}/v2/payments/x`, { headers: bearer(k.secret) })).status).toBe(200);
    await t.gw.ring.flushUsage();
    clock.set(T0 + DAY);
    // Another instance, its clock 5 s ahead, uses it now and writes its batch to the shared table.
    const table = (t.gw.ring as unknown as { table: { writeUsage(u: Map<string, number>): Promise<void> } }).table;
    await table.writeUsage(new Map([[k.id, T0 + DAY + 5_000]]));
    const one = (await (await api('GET', `/v2/api-keys/${k.id}`)).json()) as { last_used_at: string | null };
    const list = (await (await api('GET', '/v2/api-keys?limit=100')).json()) as {
      data: { id: string; last_used_at: string | null }[];
    };
    for (const at of [one.last_used_at, list.data.find((x) => x.id === k.id)?.last_used_at]) {
      expect(at).not.toBeNull();
      // What happens: 2026-11-22T12:00:00.000Z, this instance's use a day before.
      expect(Date.parse(at as string)).toBeGreaterThan(T0 + DAY - 60_000);
      expect(Date.parse(at as string)).toBeLessThanOrEqual(clock.now());
    }
  });
});
