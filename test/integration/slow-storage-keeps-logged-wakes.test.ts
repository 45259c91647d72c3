import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

/**
 * Storage that is slow rather than down: an insert that hangs held every later wake
 * unsealed, counted against capture.max_buffered_rows although the write-ahead log had
 * it on disk, and wakes past that bound were dropped as buffer_full.
 */
describe('a slow insert', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end('ok');
    });
    t = await startGateway({
      capture: { batch_rows: 100, flush_interval_ms: 100, max_buffered_rows: 300 },
      routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('drops no wake the log holds, and stores each once when the insert answers', async () => {
    await flushed(t.gw);
    const client = t.gw.store.client;
    const realInsert = client.insert.bind(client);
    const realCommand = client.command.bind(client);
    let release = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let held = 0;
    // Every write waits for the gate (the first one hangs; those after it queue behind it).
    client.insert = (async (p: Parameters<typeof client.insert>[0]) => {
      held++;
      await gate;
      return realInsert(p);
    }) as typeof client.insert;
    client.command = (async (p: Parameters<typeof client.command>[0]) => {
      if (/^\s*INSERT/i.test(p.query)) {
        held++;
        await gate;
      }
      return realCommand(p);
    }) as typeof client.command;
    let sent = 0;
    for (let i = 0; i < 1500; i += 50) {
      const codes = await Promise.all(
        Array.from({ length: 50 }, () => fetch(`${t.url}/api/slow/${sent++}`).then((r) => r.status)),
      );
      expect(codes.every((c) => c === 200)).toBe(true);
    }
    await until(async () => held > 0, 5000, 'an insert began');
    // Five times max_buffered_rows waited behind the hung insert: none dropped.
    expect(t.gw.batcher.stats.dropped).toBe(0);
    const m = await (await fetch(`${t.opsUrl}/metrics`)).text();
    expect(m).not.toMatch(/wakegate_wakes_dropped_total\{[^}]*reason="buffer_full"[^}]*\} [1-9]/);
    client.insert = realInsert;
    client.command = realCommand;
    release();
    await until(
      async () => {
        await t.gw.batcher.flush();
        return t.gw.batcher.stats.spoolBatches === 0;
      },
      20_000,
      'backlog stored',
    );
    await flushed(t.gw);
    const rs = await client.query({
      query: `SELECT count() AS c, uniqExact(path) AS p FROM ${t.gw.store.db}.wakes WHERE path LIKE '/api/slow/%'`,
      format: 'JSONEachRow',
    });
    const [row] = await rs.json<{ c: string; p: string }>();
    expect(Number(row?.c)).toBe(1500);
    expect(Number(row?.p)).toBe(1500);
    expect(t.gw.batcher.stats.dropped).toBe(0);
  }, 60_000);
});
