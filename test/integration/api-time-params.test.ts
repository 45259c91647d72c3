import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * `since` and `until` are ISO 8601 with a zone (DESIGN "The /v2 API"): a text that
 * names no instant is 400 `invalid_request` naming the parameter, never a 500.
 */
describe('since and until on /v2/wakes and /v2/stats', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({});
    await fetch(`${t.url}/v2/wakes`, { headers: bearer(t.admin) });
    await flushed(t.gw);
  });
  afterAll(async () => {
    await t.cleanup();
  });
  const get = async (path: string) => {
    const r = await fetch(`${t.url}${path}`, { headers: bearer(t.admin) });
    return { status: r.status, body: await r.json() };
  };

  const outOfRange: [string, string][] = [
    ['/v2/wakes?since=2026-01-01T00:00:00%2B25:00', 'since'],
    ['/v2/wakes?since=2026-01-01T00:00:00%2B99:99', 'since'],
    ['/v2/wakes?since=2026-01-01T00:00:00%2B23:60', 'since'],
    ['/v2/wakes?until=2026-01-01T00:00:00-24:00', 'until'],
    ['/v2/stats?since=2026-01-01T00:00:00%2B25:00', 'since'],
    ['/v2/stats?until=2026-01-01T00:00:00%2B25:00', 'until'],
  ];
  for (const [path, param] of outOfRange) {
    it(`GET ${path} is 400 invalid_request param ${param}, not 500`, async () => {
      const r = await get(path);
      expect(r.body.error?.type).toBe('invalid_request');
      expect(r.status).toBe(400);
      expect(r.body.error.param).toBe(param);
      expect(r.body.error.message).toMatch(/offset/);
    });
  }

  it('accepts an offset at the edge of the range (±23:59)', async () => {
    expect((await get('/v2/wakes?since=2026-01-01T00:00:00%2B23:59')).status).toBe(200);
    expect((await get('/v2/wakes?until=2026-01-01T00:00:00-23:59')).status).toBe(200);
  });

  it("accepts microseconds and a +00:00 offset (Python's isoformat()), cut to milliseconds", async () => {
    expect((await get('/v2/wakes?since=2026-01-01T00:00:00.123456%2B00:00')).status).toBe(200);
    const s = await get('/v2/stats?since=2026-01-01T00:00:00.123999%2B00:00&until=2026-01-01T01:00:00.000001Z');
    expect(s.status).toBe(200);
    expect(s.body).toMatchObject({ since: '2026-01-01T00:00:00.123Z', until: '2026-01-01T01:00:00.000Z' });
  });
});
