// last_used_at when the clock steps back (NTP correcting a clock an hour fast): GET /v2/api-keys and its list (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms - (ms % 1000)).toISOString();

describe('last_used_at after a clock step back', () => {
  let origin: TestServer;
  let t: TestGateway;
  const clock = new ManualClock(T0);
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const create = async (label: string) => {
    const r = await api('POST', '/v2/api-keys', { label, environment: 'production', scopes: ['payments:read'] });
    expect(r.status).toBe(201);
    return (await r.json()) as { id: string; secret: string };
  };
  const use = async (secret: string) => {
    expect((await fetch(`${t.url}/v2/payments/x`, { headers: bearer(secret) })).status).toBe(200);
  };
  const lastUsed = async (id: string) => {
    const one = (await (await api('GET', `/v2/api-keys/${id}`)).json()) as { last_used_at: string | null };
    const list = (await (await api('GET', '/v2/api-keys?limit=100')).json()) as {
      data: { id: string; last_used_at: string | null }[];
    };
    const listed = list.data.find((k) => k.id === id);
    expect(listed?.last_used_at).toBe(one.last_used_at);
    return one.last_used_at;
  };

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
    await t.cleanup();
    await origin.close();
  });

  it('used while the clock ran an hour fast, then after the step: the use at the corrected time', async () => {
    const k = await create('fast-clock');
    clock.set(T0 + HOUR);
    await use(k.secret);
    expect(await lastUsed(k.id)).toBe(iso(T0 + HOUR));
    // Written to storage, as every few seconds.
    await t.gw.ring.flushUsage();
    clock.set(T0 + 60_000);
    await use(k.secret);
    expect(await lastUsed(k.id)).toBe(iso(T0 + 60_000));
    await t.gw.ring.flushUsage();
    expect(await lastUsed(k.id)).toBe(iso(T0 + 60_000));
  });

  it('not used since the step: never later than now', async () => {
    const k = await create('fast-clock-idle');
    clock.set(T0 + 2 * HOUR);
    await use(k.secret);
    await t.gw.ring.flushUsage();
    clock.set(T0 + HOUR + 120_000);
    const at = await lastUsed(k.id);
    expect(at).not.toBeNull();
    expect(Date.parse(at as string)).toBeLessThanOrEqual(clock.now());
  });
});
