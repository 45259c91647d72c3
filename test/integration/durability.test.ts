import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

describe('durability', () => {
  let origin: TestServer;
  let rx: Receiver;
  let t: TestGateway;
  let logs = '';

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      if (req.url?.startsWith('/api/boom')) res.writeHead(502);
      res.end('ok');
    });
    rx = await startReceiver();
    t = await startGateway(
      {
        capture: { batch_rows: 500, flush_interval_ms: 100 },
        routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
        webhooks: { allow_insecure_http: true, allow_private_networks: true },
        log: { level: 'debug' },
      },
      {
        spoolRetryMs: 200,
        log: createLogger('debug', (l) => {
          logs += l;
        }),
      },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
    await rx.close();
  });

  it('keeps every wake through a storage outage mid-load, stored exactly once after it', async () => {
    const client = t.gw.store.client;
    const realInsert = client.insert.bind(client);
    const realCommand = client.command.bind(client);
    let down = false;
    // Every write fails while storage is down: inserts of rows, and the INSERT … SELECT
    // that loads a log segment from its file.
    client.insert = ((p: Parameters<typeof client.insert>[0]) => {
      if (down) return Promise.reject(new Error('storage unreachable (injected)'));
      return realInsert(p);
    }) as typeof client.insert;
    client.command = ((p: Parameters<typeof client.command>[0]) => {
      if (down && /^\s*INSERT/i.test(p.query)) return Promise.reject(new Error('storage unreachable (injected)'));
      return realCommand(p);
    }) as typeof client.command;
    await flushed(t.gw);
    const before = await t.gw.wakes.count('production');
    let sent = 0;
    const send = async (n: number) => {
      for (let i = 0; i < n; i += 50) {
        await Promise.all(
          Array.from({ length: 50 }, () => fetch(`${t.url}/api/o/${sent++}`).then((r) => r.arrayBuffer())),
        );
      }
    };
    await send(2000);
    down = true;
    await send(4000);
    await new Promise((r) => setTimeout(r, 300));
    const ready = await (await fetch(`${t.opsUrl}/readyz`)).json();
    expect(ready).toMatchObject({ status: 'degraded', storage: 'down' });
    expect(ready.spool_batches).toBeGreaterThan(0);
    const m = await (await fetch(`${t.opsUrl}/metrics`)).text();
    expect(m).toMatch(/wakegate_storage_up 0/);
    expect(m).toMatch(/wakegate_spool_bytes [1-9]/);
    // The proxy kept serving during the outage.
    expect(sent).toBe(6000);
    await new Promise((r) => setTimeout(r, 3000));
    down = false;
    await send(2000);
    await until(
      async () => {
        await t.gw.batcher.flush();
        return t.gw.batcher.stats.spoolBatches === 0;
      },
      20_000,
      'spool replayed',
    );
    await flushed(t.gw);
    const after = await t.gw.wakes.count('production');
    // Every request of the run, exactly once (ids are unique, and so are paths).
    const rs = await t.gw.store.client.query({
      query: `SELECT count() AS c, uniqExact(id) AS u, uniqExact(path) AS p FROM ${t.gw.store.db}.wakes WHERE path LIKE '/api/o/%'`,
      format: 'JSONEachRow',
    });
    const [row] = await rs.json<{ c: string; u: string; p: string }>();
    expect(Number(row?.c)).toBe(8000);
    expect(Number(row?.u)).toBe(8000);
    expect(Number(row?.p)).toBe(8000);
    expect(after - before).toBeGreaterThanOrEqual(8000);
    expect(t.gw.batcher.stats.dropped).toBe(0);
    const ok = await (await fetch(`${t.opsUrl}/readyz`)).json();
    expect(ok.status).toBe('ready');
    client.insert = realInsert;
    client.command = realCommand;
  }, 60_000);

  it('never writes a key or signing secret to the logs or to any stored row', async () => {
    const secrets: string[] = [t.admin];
    const { secret: k1 } = await t.gw.keys.create(
      { label: 'a', environment: 'production', scopes: ['wakes:read', 'webhooks:write', 'keys:write'] },
      'production',
    );
    secrets.push(k1);
    const created = await (
      await fetch(`${t.url}/v2/api-keys`, {
        method: 'POST',
        headers: { ...bearer(k1), 'content-type': 'application/json' },
        body: JSON.stringify({ label: 'b', environment: 'production', scopes: ['wakes:read'] }),
      })
    ).json();
    secrets.push(created.secret);
    const ep = await (
      await fetch(`${t.url}/v2/webhooks/endpoints`, {
        method: 'POST',
        headers: { ...bearer(k1), 'content-type': 'application/json' },
        body: JSON.stringify({ url: rx.url, events: ['*'] }),
      })
    ).json();
    secrets.push(ep.secret);
    // Use and abuse the keys: good calls, a revoked key, a rotated one, a key in a query string.
    await fetch(`${t.url}/v2/wakes`, { headers: bearer(created.secret) });
    await fetch(`${t.url}/api/x?token=${created.secret}`, { headers: { 'user-agent': 'curl/8' } });
    await fetch(`${t.url}/api/boom`);
    await fetch(`${t.url}/v2/api-keys/${created.id}`, { method: 'DELETE', headers: bearer(k1) });
    await fetch(`${t.url}/v2/wakes`, { headers: bearer(created.secret) });
    await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(k1), 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'c', environment: 'production', scopes: ['wakes:read'], replaces: created.id }),
    });
    await rx.waitFor(2, 10_000);
    await flushed(t.gw);
    await t.gw.events.flush();
    await t.gw.dispatcher.idle();
    const dump: string[] = [];
    const tables = await (
      await t.gw.store.client.query({ query: `SHOW TABLES FROM ${t.gw.store.db}`, format: 'JSONEachRow' })
    ).json<{ name: string }>();
    for (const { name } of tables) {
      const rs = await t.gw.store.client.query({
        query: `SELECT * FROM ${t.gw.store.db}.${name}`,
        format: 'JSONEachRow',
      });
      dump.push(JSON.stringify(await rs.json()));
    }
    const stored = dump.join('\n');
    expect(stored.length).toBeGreaterThan(10_000);
    expect(logs.length).toBeGreaterThan(1000);
    for (const s of secrets) {
      const body = s.slice(s.indexOf('_', 4) + 1);
      expect(stored.includes(body), `stored rows hold ${s.slice(0, 10)}…`).toBe(false);
      expect(logs.includes(body), `logs hold ${s.slice(0, 10)}…`).toBe(false);
    }
    expect(stored).not.toMatch(/whsec_[0-9A-Za-z+/]{20}/);
    expect(stored).not.toMatch(/svc_(live|test)_[0-9A-Za-z]{20}/);
  });
});
