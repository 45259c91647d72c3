// Regression tests from a review of isolation between environments and scopes (2026-11-27).
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * A replay is sent "through the same route" (DESIGN, Wake detail and replay), and a
 * route's `timeout_ms` means "no answer in time -> 504 upstream_timeout" (DESIGN,
 * Configuration). The replayer waits a fixed 30 s for any route (src/proxy/replay.ts:262)
 * and records any failure as 502 (replay.ts:278). So a replay of a route with
 * timeout_ms 300 holds its place (REPLAY_LIMITS) for 30 s, and its wake says 502.
 * Expected: the replay's wake is recorded within the route's timeout (plus slack), as 504.
 */
describe("a replay keeps to its route's timeout_ms", () => {
  let origin: TestServer;
  let t: TestGateway;
  const held: ServerResponse[] = [];
  let first = true;

  beforeAll(async () => {
    // Answers the first request at once (the wake to replay), then never answers.
    origin = await startServer((_req, res) => {
      if (first) {
        first = false;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
        return;
      }
      held.push(res);
    });
    t = await startGateway({
      routes: [
        {
          name: 'payments',
          prefix: '/v2/payments',
          timeout_ms: 300,
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url, sandbox: origin.url },
        },
      ],
    });
  });
  afterAll(async () => {
    for (const r of held) r.destroy();
    await t.cleanup();
    await origin.close();
  });

  it('the replay of a route with timeout_ms 300 is recorded as 504 within a few seconds', async () => {
    const w = await fetch(`${t.url}/v2/payments/7`, { headers: bearer(t.admin) });
    await w.text();
    const wakeId = w.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const r = await fetch(`${t.url}/v2/wakes/${wakeId}/replay`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: '{}',
    });
    expect(r.status).toBe(202);
    const { replay_wake_id } = (await r.json()) as { replay_wake_id: string };
    // biome-ignore lint/suspicious/noExplicitAny: read loosely
    let got: any = null;
    const deadline = Date.now() + 4000;
    while (Date.now() < deadline && got === null) {
      await flushed(t.gw);
      const g = await fetch(`${t.url}/v2/wakes/${replay_wake_id}`, { headers: bearer(t.admin) });
      if (g.status === 200) got = await g.json();
      else await g.text();
    }
    expect(got, 'the replay is still waiting for the origin after 4 s (route timeout_ms is 300)').not.toBeNull();
    expect(got.status).toBe(504);
  });
});
