import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { EventTable } from '../../src/store/events.js';
import { queryRows } from '../../src/store/store.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

/**
 * A scheduled revocation whose instant passes while no gateway runs (stopped, killed,
 * or mid-deploy) raises key.revoked at the next start: it was never raised, since a
 * start took every key already revoked as announced by whoever revoked it. From a
 * review of durability; the first test failed first.
 */
describe('a scheduled revocation across a restart', () => {
  const DAY = 86_400_000;
  let origin: TestServer;
  let dir: string;
  const admin = `svc_live_${'r'.repeat(32)}`;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));
  let t: TestGateway | null = null;

  const start = async () => {
    t = await startGateway(
      {
        routes: [
          { name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url, sandbox: origin.url } },
        ],
      },
      { clock, dir, admin },
    );
    return t;
  };
  const stop = async () => {
    await t?.stop();
    t = null;
  };
  const schedule = async (g: TestGateway, label: string, at: number) => {
    const r = await fetch(`${g.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(admin), 'content-type': 'application/json' },
      body: JSON.stringify({ label, environment: 'production', scopes: ['wakes:read'] }),
    });
    expect(r.status).toBe(201);
    const k = (await r.json()) as { id: string };
    const d = await fetch(`${g.url}/v2/api-keys/${k.id}`, {
      method: 'DELETE',
      headers: { ...bearer(admin), 'content-type': 'application/json' },
      body: JSON.stringify({ revoke_at: new Date(at).toISOString() }),
    });
    expect(d.status).toBe(200);
    return k.id;
  };
  const revokedEvents = async (g: TestGateway, id: string) => {
    await g.gw.events.flush();
    return (await new EventTable(g.gw.store).list({ type: 'key.revoked' })).filter(
      (e) => (e.data.key as { id: string }).id === id,
    );
  };
  /** The key's stored record, its latest version. */
  const stored = async (g: TestGateway, id: string) => {
    const [row] = await queryRows<{ revoked_at: string | null }>(
      g.gw.store,
      `SELECT toUnixTimestamp64Milli(revoked_at) AS revoked_at FROM ${g.gw.store.db}.api_keys FINAL WHERE id = {id:String}`,
      { id },
    );
    return row?.revoked_at === null || row?.revoked_at === undefined ? null : Number(row.revoked_at);
  };

  beforeAll(async () => {
    origin = await echoOrigin('prod');
    dir = mkdtempSync(join(tmpdir(), 'wakegate-scheduled-restart-'));
  });
  afterAll(async () => {
    await stop();
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('raises key.revoked once at the next start, at revoke_at, and marks it raised on the key', async () => {
    const at = clock.now() + 60_000;
    const id = await schedule(await start(), 'nightly', at);
    await stop();
    // The instant passes while nothing runs.
    clock.set(at + 3_600_000);
    const g = await start();
    g.gw.keys.sweepScheduled();
    const ev = await revokedEvents(g, id);
    expect(ev).toHaveLength(1);
    expect(ev[0]).toMatchObject({ created_at: at, data: { scheduled: true } });
    // Marked once the event is written: the next start does not raise it again.
    await expect.poll(() => stored(g, id), { timeout: 5_000 }).toBe(at);
    await stop();
    clock.set(at + 7_200_000);
    const again = await start();
    const raised: string[] = [];
    const emit = again.gw.events.emit.bind(again.gw.events);
    again.gw.events.emit = ((type, env, data, when, dedupe) => {
      raised.push(type);
      return emit(type, env, data, when, dedupe);
    }) as typeof emit;
    again.gw.keys.sweepScheduled();
    expect(raised).toEqual([]);
    expect(await revokedEvents(again, id)).toHaveLength(1);
    await stop();
  });

  it('one that came longer ago than events are kept is not raised a month late', async () => {
    const at = clock.now() + 60_000;
    const id = await schedule(await start(), 'long ago', at);
    await stop();
    clock.set(at + 31 * DAY);
    const g = await start();
    g.gw.keys.sweepScheduled();
    expect(await revokedEvents(g, id)).toHaveLength(0);
    // Still revoked, whatever was raised.
    expect((await fetch(`${g.url}/v2/api-keys/${id}`, { headers: bearer(admin) })).status).toBe(200);
    await stop();
  });
});
