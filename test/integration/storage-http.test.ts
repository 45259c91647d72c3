import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Wake } from '../../src/capture/wake.js';
import { LOG_SEGMENT_TAG, wakeLogCodec } from '../../src/capture/wake-log.js';
import { Wal } from '../../src/capture/wal.js';
import { loadConfig } from '../../src/config/index.js';
import { newSecret, newWakeId } from '../../src/ids.js';
import { silentLogger } from '../../src/log.js';
import { openStore } from '../../src/store/client.js';
import { MIGRATIONS, migrate } from '../../src/store/migrations.js';
import { queryRows, type Store } from '../../src/store/store.js';
import { WakeInserter } from '../../src/store/wakes.js';
import { spawnGateway } from '../helpers/child.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * CLICKHOUSE_URL: storage in another process behind ClickHouse's HTTP interface
 * (scripts/chdb-http.mjs, over chDB; not a ClickHouse server, which cannot run here).
 */
describe('storage over HTTP (CLICKHOUSE_URL)', () => {
  let storage: HttpStorage;
  let origin: TestServer;
  let store: Store;
  let dir: string;
  let served = 0;
  const admin = `svc_live_${newSecret()}`;
  const auth = { authorization: `Bearer ${admin}` };

  beforeAll(async () => {
    storage = await startHttpStorage();
    origin = await startServer((req, res) => {
      served++;
      if (req.url?.startsWith('/boom')) res.writeHead(500);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ url: req.url, password: 'hunter2', served }));
    });
    dir = mkdtempSync(join(tmpdir(), 'wakegate-http-storage-gw-'));
    store = await openStore(loadConfig({ env: { DATA_DIR: dir, CLICKHOUSE_URL: storage.url } }).storage);
    // Every migration over HTTP (the remade detail table, the log table and its views among them).
    expect(await migrate(store)).toEqual(MIGRATIONS.map((m) => m.version));
  });
  afterAll(async () => {
    await store.close();
    await origin.close();
    await storage.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const count = async (table: string, where = "path LIKE '/items/%' AND replay_of = ''") =>
    Number(
      (await queryRows<{ n: string }>(store, `SELECT count() AS n FROM ${store.db}.${table} WHERE ${where}`))[0]?.n,
    );

  /** Waits (bounded) until `f` returns `want`; returns what it last returned. */
  async function settle<T>(f: () => Promise<T>, want: T, ms = 15_000): Promise<T> {
    const end = Date.now() + ms;
    let v = await f();
    while (v !== want && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 100));
      v = await f();
    }
    return v;
  }

  it('regression: the storage process survives a client that goes away mid-request (a gateway killed mid-insert)', async () => {
    const { request } = await import('node:http');
    const { port } = new URL(storage.url);
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/?query=SELECT%201' });
    const gone = new Promise<void>((r) => req.on('error', () => r()));
    req.write('x\t'.repeat(10_000));
    await new Promise((r) => setTimeout(r, 100));
    req.destroy();
    await gone;
    await new Promise((r) => setTimeout(r, 200));
    expect(storage.proc.exitCode).toBeNull();
    expect(storage.proc.signalCode).toBeNull();
    expect(await (await fetch(`${storage.url}/ping`)).text()).toBe('Ok.\n');
  });

  it('stores every wake once with its detail, through a kill and a restart, and replays one', async () => {
    const env = {
      DATA_DIR: join(dir, 'data'),
      ORIGIN_URL: origin.url,
      WAKEGATE_ADMIN_KEY: admin,
      CLICKHOUSE_URL: storage.url,
    };
    const g1 = await spawnGateway(['serve'], env);
    const ids: string[] = [];
    for (let batch = 0; batch < 30; batch++) {
      await Promise.all(
        Array.from({ length: 10 }, async (_, i) => {
          const r = await fetch(`${g1.url}/items/${batch * 10 + i}?q=1`);
          await r.arrayBuffer();
          expect(r.status).toBe(200);
          ids.push(r.headers.get('x-wake-id') as string);
        }),
      );
    }
    // In the log within 10 ms; the kill comes before any batch of the last 500 ms is stored.
    await new Promise((r) => setTimeout(r, 60));
    g1.proc.kill('SIGKILL');
    await g1.exited;
    const g2 = await spawnGateway(['serve'], env);
    try {
      expect(await settle(() => count('wakes'), 300)).toBe(300);
      expect(await settle(() => count('wake_details', "query = '?q=1'"), 300)).toBe(300);
      const distinct = await queryRows<{ n: string }>(
        store,
        `SELECT uniqExact(id) AS n FROM ${store.db}.wakes WHERE id IN {ids:Array(String)}`,
        { ids },
      );
      expect(Number(distinct[0]?.n)).toBe(300);

      const one = await (await fetch(`${g2.url}/v2/wakes/${ids[0]}`, { headers: auth })).json();
      expect(one.request.query).toBe('?q=1');
      expect(one.response.body).toMatch(/"password":"\[redacted:[0-9a-f]{12}\]"/);
      expect(JSON.stringify(one)).not.toContain('hunter2');

      const replay = await fetch(`${g2.url}/v2/wakes/${ids[0]}/replay`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(replay.status).toBe(202);
      const { replay_wake_id } = await replay.json();
      const replayed = await settle(
        async () => (await fetch(`${g2.url}/v2/wakes/${replay_wake_id}`, { headers: auth })).status,
        200,
      );
      expect(replayed).toBe(200);
      const rw = await (await fetch(`${g2.url}/v2/wakes/${replay_wake_id}`, { headers: auth })).json();
      expect(rw.replay_of).toBe(ids[0]);
      expect(rw.diff).not.toBeNull();
    } finally {
      g2.proc.kill('SIGTERM');
      await g2.exited;
    }
    // Stopped cleanly: nothing was stored twice (the replay is a wake of its own).
    expect(await count('wakes')).toBe(300);
    expect(await count('wakes', `replay_of = '${ids[0]}'`)).toBe(1);
  });

  it('regression: a segment file gone before its insert read it rejects that insert, never the process', async () => {
    const ins = new WakeInserter(
      store,
      wakeLogCodec(() => 30),
    );
    // A tagged segment (streamed as the insert's body) that is not there: an operator's rm, a disk gone.
    const missing = join(dir, `00000000000001-gone-0.${LOG_SEGMENT_TAG}.wal`);
    await expect(ins.insert([], 'gone-token', missing)).rejects.toThrow(/ENOENT/);
  });

  it('streams a segment of this version into the log table once per token; an earlier version’s goes in cut per table', async () => {
    const ins = new WakeInserter(
      store,
      wakeLogCodec(() => 30),
    );
    const wake = (environment: string, i: number): Wake => ({
      id: newWakeId(Date.now()),
      method: 'POST',
      path: `/seg/${i}`,
      route: 'r',
      status: 201,
      latency_ms: 3,
      consumer: 'c',
      key_id: '',
      environment,
      region: 'local',
      captured_at: Date.now(),
      request_bytes: 2,
      response_bytes: 2,
      client_ip: '127.0.0.1',
      user_agent: 'ua',
      detail: {
        query: '?x=1',
        request_headers: [['content-type', 'application/json']],
        response_headers: null,
        request_body: { data: Buffer.from('{"a":"tab\there"}'), bytes: 16, truncated: false, encoding: 'utf8' },
        response_body: null,
        diff: null,
      },
    });
    for (const tag of [LOG_SEGMENT_TAG, '']) {
      const env = `http-seg${tag}`;
      const wal = new Wal<Wake>(
        mkdtempSync(join(dir, 'wal-')),
        1_000_000,
        { syncIntervalMs: 60_000, fsyncIntervalMs: 60_000, ...(tag ? { tag } : {}) },
        silentLogger,
        wakeLogCodec(() => 30),
      );
      const rows = [wake(env, 1), wake(env, 2)];
      for (const w of rows) wal.append(w);
      const sealed = wal.seal();
      wal.close();
      const file = sealed?.file as string;
      for (let k = 0; k < 2; k++) {
        if (tag) await ins.insert([], sealed?.token as string, file);
        else await ins.insert(rows, sealed?.token as string, file);
      }
      expect(await count('wakes', `environment = '${env}'`)).toBe(2);
      const details = await queryRows<{ request_body: string }>(
        store,
        `SELECT request_body FROM ${store.db}.wake_details WHERE environment = {env:String}`,
        { env },
      );
      expect(details.map((d) => d.request_body)).toEqual(['{"a":"tab\there"}', '{"a":"tab\there"}']);
    }
  });
});
