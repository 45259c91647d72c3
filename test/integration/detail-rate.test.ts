import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { queryRows } from '../../src/store/store.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

describe('capture.detail.max_per_second and max_bytes_per_second: how many exchanges a second keep their detail', () => {
  const clock = new ManualClock(Date.now());
  let origin: TestServer;
  let t: TestGateway;

  /** An unkeyed route at /<name> whose detail limits are `detail` over the defaults given below. */
  const route = (name: string, detail: Record<string, number>) => ({
    name,
    prefix: `/${name}`,
    auth: 'none',
    origins: { production: origin.url },
    capture: { detail },
  });

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const failed = req.url?.includes('/fail') === true;
        res.writeHead(failed ? 500 : 200, { 'content-type': 'application/json' });
        // Under /big: 600 bytes of JSON.
        const pad = req.url?.startsWith('/big') ? 'x'.repeat(600 - 29 - (req.url?.length ?? 0)) : '';
        res.end(JSON.stringify({ ok: !failed, url: req.url, ...(pad ? { pad } : {}) }));
      });
    });
    t = await startGateway(
      {
        capture: { detail: { max_per_second: 2 } },
        routes: [
          route('api', {}),
          route('all', { max_per_second: 0 }),
          route('big', { max_per_second: 0, max_bytes_per_second: 1000 }),
        ],
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  const send = async (path: string): Promise<string> => {
    const r = await fetch(`${t.url}${path}`);
    await r.arrayBuffer();
    return r.headers.get('x-wake-id') as string;
  };
  const detailOf = async (id: string) => {
    const r = await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) });
    expect(r.status).toBe(200);
    return (await r.json()) as { request: unknown; response: { body: string } | null };
  };
  const skipped = async (reason: string): Promise<number> => {
    const text = await (await fetch(`${t.opsUrl}/metrics`)).text();
    const m = new RegExp(`^wakegate_wake_details_skipped_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(text);
    return Number(m?.[1] ?? Number.NaN);
  };

  it('keeps a second of exchanges per route, failed ones apart; the rest keep their summary, counted', async () => {
    const ok = [];
    for (let i = 0; i < 4; i++) ok.push(await send(`/api/items/${i}`));
    const failed = [];
    for (let i = 0; i < 3; i++) failed.push(await send(`/api/fail/${i}`));
    const every = [];
    for (let i = 0; i < 5; i++) every.push(await send(`/all/items/${i}`));
    await flushed(t.gw);

    const kept = async (ids: string[]) => Promise.all(ids.map(async (id) => (await detailOf(id)).request !== null));
    // Two of the four successes; the failures were not crowded out by them: two of three.
    expect(await kept(ok)).toEqual([true, true, false, false]);
    expect(await kept(failed)).toEqual([true, true, false]);
    // A route with max_per_second: 0 keeps every exchange.
    expect(await kept(every)).toEqual([true, true, true, true, true]);
    expect(JSON.parse((await detailOf(ok[0] as string)).response?.body ?? '')).toEqual({
      ok: true,
      url: '/api/items/0',
    });
    // Every wake is stored all the same; only the detail table is short.
    const rows = await queryRows<{ n: string }>(t.gw.store, `SELECT count() AS n FROM ${t.gw.store.db}.wake_details`);
    expect(Number(rows[0]?.n)).toBe(2 + 2 + 5);
    expect(await skipped('rate')).toBe(3);
    expect(await skipped('memory')).toBe(0);

    // A wake without detail cannot be replayed, and the refusal says why.
    const r = await fetch(`${t.url}/v2/wakes/${ok[3]}/replay`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: '{}',
    });
    expect(r.status).toBe(409);
    const e = (await r.json()) as { error: { type: string; message: string } };
    expect(e.error.type).toBe('conflict');
    expect(e.error.message).toContain('capture.detail.max_per_second');

    // Half a second earns one success its detail back (two a second), not two.
    clock.advance(500);
    const later = [await send('/api/items/later'), await send('/api/items/later2')];
    await flushed(t.gw);
    expect(await kept(later)).toEqual([true, false]);
    expect(await skipped('rate')).toBe(4);
  });

  it('keeps at most max_bytes_per_second of bodies a second per route', async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await send(`/big/${i}`));
    await flushed(t.gw);
    const kept = [];
    for (const id of ids) {
      const d = await detailOf(id);
      if (d.response) expect(d.response.body.length).toBe(600);
      kept.push(d.request !== null);
    }
    // 600 bytes, then 600 more with 400 left (the bucket goes into debt), then nothing.
    expect(kept).toEqual([true, true, false]);
    clock.advance(1000); // 1,000 bytes earned: the 200 of debt paid, 800 left
    const later = await send('/big/later');
    await flushed(t.gw);
    expect((await detailOf(later)).request).not.toBeNull();
  });

  it('a replay keeps its detail and diff while its route has no tokens left', async () => {
    clock.advance(1000);
    const source = await send('/api/items/r1');
    await send('/api/items/spend');
    const spent = await send('/api/items/spent');
    await flushed(t.gw);
    expect((await detailOf(source)).request).not.toBeNull();
    expect((await detailOf(spent)).request).toBeNull();
    const r = await fetch(`${t.url}/v2/wakes/${source}/replay`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: '{}',
    });
    expect(r.status).toBe(202);
    const { replay_wake_id } = (await r.json()) as { replay_wake_id: string };
    type ReplayWake = { request: unknown; diff: { identical: boolean } | null };
    const replayWake = async (): Promise<ReplayWake | null> => {
      await flushed(t.gw);
      const g = await fetch(`${t.url}/v2/wakes/${replay_wake_id}`, { headers: bearer(t.admin) });
      return g.status === 200 ? ((await g.json()) as ReplayWake) : null;
    };
    let replay = await replayWake();
    for (let i = 0; i < 100 && !replay?.diff; i++) replay = await replayWake();
    expect(replay?.request).not.toBeNull();
    expect(replay?.diff?.identical).toBe(true);
    expect(await skipped('rate')).toBe(6);
  });
});
