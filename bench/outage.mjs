#!/usr/bin/env node
import { mkdtempSync, rmSync } from 'node:fs';
// bench:outage — 100,000 requests through the gateway while storage goes away for
// 30 seconds and comes back; every one of the wakes must end up stored exactly once.
// The gateway runs in this process so storage can be made to fail: every insert
// (wakes, events, deliveries) is refused during the outage.
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cannon, ROOT, table } from './lib.mjs';

const { Gateway } = await import(join(ROOT, 'dist/app.js'));
const { loadConfig } = await import(join(ROOT, 'dist/config/index.js'));
const { silentLogger } = await import(join(ROOT, 'dist/log.js'));

const TOTAL = Number(process.env.BENCH_OUTAGE_REQUESTS ?? 100_000);
const OUTAGE_S = Number(process.env.BENCH_OUTAGE_SECONDS ?? 30);
const RATE = Number(process.env.BENCH_OUTAGE_RATE ?? 2000);
const body = JSON.stringify({ ok: true });
const origin = http.createServer((_req, res) => res.end(body));
await new Promise((r) => origin.listen(0, '127.0.0.1', r));
const dir = mkdtempSync(join(tmpdir(), 'wakegate-outage-'));
const cfg = loadConfig({
  values: {
    server: { port: 0, host: '127.0.0.1', ops_port: 0 },
    rate_limits: { default: { limit: 1e9, burst: 1e9, window: 'minute' } },
    routes: [
      {
        name: 'bench',
        prefix: '/',
        auth: 'none',
        origins: { production: `http://127.0.0.1:${origin.address().port}` },
      },
    ],
  },
  env: { DATA_DIR: dir },
});
const gw = new Gateway(cfg, { log: silentLogger, spoolRetryMs: 1000 });
try {
  const { port, opsPort } = await gw.start();
  const client = gw.store.client;
  const realInsert = client.insert.bind(client);
  let down = false;
  const realCommand = client.command.bind(client);
  client.insert = (p) => (down ? Promise.reject(new Error('storage unreachable (injected outage)')) : realInsert(p));
  // A log segment is loaded by an INSERT … SELECT from its file: that fails too.
  client.command = (p) =>
    down && /^\s*INSERT/i.test(p.query)
      ? Promise.reject(new Error('storage unreachable (injected outage)'))
      : realCommand(p);
  const secs = TOTAL / RATE;
  const outageStart = Math.max(2, (secs - OUTAGE_S) / 2);
  let maxSpool = 0;
  let readyDuring = null;
  const t1 = setTimeout(() => {
    down = true;
    process.stderr.write('storage down\n');
  }, outageStart * 1000);
  const t2 = setTimeout(
    async () => {
      readyDuring = await (await fetch(`http://127.0.0.1:${opsPort}/readyz`)).json();
      maxSpool = gw.batcher.stats.spoolBytes;
      down = false;
      process.stderr.write('storage back\n');
    },
    (outageStart + OUTAGE_S) * 1000,
  );
  const r = await cannon({
    url: `http://127.0.0.1:${port}/bench/item`,
    connections: 20,
    overallRate: RATE,
    amount: TOTAL,
  });
  clearTimeout(t1);
  clearTimeout(t2);
  down = false;
  const deadline = Date.now() + 120_000;
  while ((gw.batcher.stats.spoolBatches > 0 || gw.batcher.buffered > 0) && Date.now() < deadline) {
    await gw.batcher.flush();
    await new Promise((res) => setTimeout(res, 200));
  }
  const rs = await client.query({
    query: "SELECT count() AS c, uniqExact(id) AS u FROM wakegate.wakes WHERE route = 'bench'",
    format: 'JSONEachRow',
  });
  const [row] = await rs.json();
  const served = r['2xx'] + r.non2xx;
  console.log(
    `\nbench:outage — ${TOTAL.toLocaleString('en-US')} requests at ${RATE}/s; storage refused every insert for ${OUTAGE_S} s from t=${outageStart.toFixed(0)} s\n`,
  );
  console.log(
    table(
      ['measure', 'value', 'met'],
      [
        [
          'responses (2xx / errors)',
          `${r['2xx']} / ${r.errors + r.timeouts}`,
          r.errors + r.timeouts === 0 ? 'yes' : 'NO',
        ],
        ['wakes stored', String(row.c), Number(row.c) === served ? 'yes' : 'NO'],
        ['distinct wake ids', String(row.u), Number(row.u) === Number(row.c) ? 'yes (exactly once)' : 'NO'],
        ['wakes dropped', String(gw.batcher.stats.dropped), gw.batcher.stats.dropped === 0 ? 'yes' : 'NO'],
        ['spool at the end of the outage', `${(maxSpool / 1048576).toFixed(1)} MB`, ''],
        [
          '/readyz during the outage',
          readyDuring ? `${readyDuring.status}, storage ${readyDuring.storage}` : 'n/a',
          '',
        ],
        ['p99 latency over the run', `${r.latency.p99} ms`, ''],
      ],
    ),
  );
} finally {
  await gw.stop();
  origin.close();
  rmSync(dir, { recursive: true, force: true });
}
