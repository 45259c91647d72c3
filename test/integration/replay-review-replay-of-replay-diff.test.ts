// Regression tests from a review of wake replay (2026-11-28): replays of replays and their diff.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * docs/api.md: "Without `set`, a replay is marked as the wake it replays, so their diff
 * tells equal from changed." A replay is a wake of its own (`replay_of`) and can be
 * replayed in turn. The replayer salts a replay without set with the id of the wake it
 * replays (replay/salts.ts), but the replay's own stored markers carry its original's
 * salt, not its own id: so a replay of a replay is salted with an id its "before" side
 * was never marked with, and an unchanged redacted value in the answer shows as changed.
 */
describe('a replay of a replay, without set, diffs equal values as equal', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    // The same answer every time; `token` is redacted by default.
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"token":"tok_always_the_same","n":1}');
      });
    });
    t = await startGateway({
      routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const replay = async (id: string) => {
    const r = await fetch(`${t.url}/v2/wakes/${id}/replay`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: '{}',
    });
    expect(r.status).toBe(202);
    return ((await r.json()) as { replay_wake_id: string }).replay_wake_id;
  };
  // biome-ignore lint/suspicious/noExplicitAny: read loosely
  const finished = async (id: string): Promise<any> => {
    const deadline = Date.now() + 8000;
    while (Date.now() < deadline) {
      await flushed(t.gw);
      const g = await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) });
      if (g.status === 200) {
        const w = await g.json();
        if (w.diff) return w;
      } else await g.text();
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`the replay ${id} was not recorded`);
  };

  it('control: the first replay of an unchanged answer is identical', async () => {
    const r = await fetch(`${t.url}/api/thing`);
    await r.text();
    const w0 = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const r1 = await finished(await replay(w0));
    expect(r1.diff).toMatchObject({ identical: true, body: [] });
  });

  it('the replay of that replay (the origin answering the same bytes) is identical too', async () => {
    const r = await fetch(`${t.url}/api/thing`);
    await r.text();
    const w0 = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const r1 = await finished(await replay(w0));
    expect(r1.diff.identical).toBe(true);
    const r2 = await finished(await replay(r1.id));
    expect(r2.replay_of).toBe(r1.id);
    // Fails today: $.token's marker differs (salted with r1's id; r1 was marked with w0's).
    expect(r2.diff.body).toEqual([]);
    expect(r2.diff.identical).toBe(true);
  });
});
