#!/usr/bin/env node
// bench:list — GET /v2/wakes p50/p95 over 10 million stored wakes, with no filter
// and with each filter, through the real listener. The wakes are made in SQL
// (INSERT ... SELECT FROM numbers()) spread over 10 days.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, table } from './lib.mjs';

const { Gateway } = await import(join(ROOT, 'dist/app.js'));
const { loadConfig } = await import(join(ROOT, 'dist/config/index.js'));
const { silentLogger } = await import(join(ROOT, 'dist/log.js'));
const { newSecret } = await import(join(ROOT, 'dist/ids.js'));

const N = Number(process.env.BENCH_LIST_ROWS ?? 10_000_000);
const REQUESTS = Number(process.env.BENCH_LIST_REQUESTS ?? 40);
const dir = mkdtempSync(join(tmpdir(), 'wakegate-list-'));
const admin = `svc_live_${newSecret()}`;
const cfg = loadConfig({
  values: {
    server: { port: 0, host: '127.0.0.1', ops_port: 0 },
    log: { level: 'warn' },
    rate_limits: { default: { limit: 1e9, burst: 1e9, window: 'minute' } },
  },
  env: { DATA_DIR: dir, WAKEGATE_ADMIN_KEY: admin },
});
const gw = new Gateway(cfg, { log: silentLogger });
try {
  await gw.init();
  const t0 = performance.now();
  const end = Date.now();
  await gw.store.client.command({
    query: `INSERT INTO wakegate.wakes
      SELECT
        concat('wk_', leftPad(lower(hex(toUnixTimestamp64Milli(t))), 11, '0'), leftPad(toString(number), 14, '0')) AS id,
        'production' AS environment,
        t AS captured_at,
        if(number % 5 = 0, 'POST', 'GET') AS method,
        concat('/v2/payments/p_', toString(number % 5000), if(number % 3 = 0, '/refunds', '')) AS path,
        'payments' AS route,
        multiIf(number % 97 = 0, 503, number % 31 = 0, 404, 200) AS status,
        toUInt32(number % 1000) AS latency_ms,
        concat('consumer-', toString(number % 2000)) AS consumer,
        concat('key_', leftPad(toString(number % 2000), 20, '0')) AS key_id,
        'local' AS region, 100 AS request_bytes, 1024 AS response_bytes, '10.0.0.1' AS client_ip, 'bench' AS user_agent,
        30 AS retention_days
      FROM (SELECT number, fromUnixTimestamp64Milli(toInt64(${end} - (number * 86400000 * 10) / ${N}), 'UTC') AS t FROM numbers(${N}))`,
    clickhouse_settings: { max_insert_threads: 2 },
  });
  const loadSecs = (performance.now() - t0) / 1000;
  const count = await gw.wakes.count('production');
  process.stderr.write(`${count} wakes stored in ${loadSecs.toFixed(1)} s\n`);
  const { port } = await gw.start();
  const base = `http://127.0.0.1:${port}/v2/wakes`;
  const headers = { authorization: `Bearer ${admin}` };
  const first = await (await fetch(`${base}?limit=20`, { headers })).json();
  const cases = [
    ['no filter', ''],
    ['page 2 (cursor)', `cursor=${first.next_cursor}`],
    ['status=503', 'status=503'],
    ['status_class=4xx', 'status_class=4xx'],
    ['path=/v2/payments/{id}/refunds', 'path=/v2/payments/{id}/refunds'],
    ['path=/v2/payments/p_42 (literal)', 'path=/v2/payments/p_42'],
    ['consumer=consumer-42', 'consumer=consumer-42'],
    ['key_id=key_…1234', `key_id=key_${'1234'.padStart(20, '0')}`],
    ['min_latency_ms=990', 'min_latency_ms=990'],
    ['consumer=nobody (matches none)', 'consumer=nobody'],
  ];
  const rows = [];
  for (const [name, q] of cases) {
    const url = `${base}?limit=20${q ? `&${q}` : ''}`;
    for (let i = 0; i < 3; i++) await (await fetch(url, { headers })).arrayBuffer();
    const times = [];
    let n = 0;
    for (let i = 0; i < REQUESTS; i++) {
      const t = performance.now();
      const r = await fetch(url, { headers });
      const body = await r.json();
      times.push(performance.now() - t);
      if (r.status !== 200) throw new Error(`${name}: ${r.status} ${JSON.stringify(body)}`);
      n = body.data.length;
    }
    times.sort((a, b) => a - b);
    const p = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
    rows.push([name, String(n), p(0.5).toFixed(1), p(0.95).toFixed(1), p(0.95) <= 100 ? 'yes' : 'NO']);
  }
  console.log(
    `\nbench:list — GET /v2/wakes?limit=20 over ${count.toLocaleString('en-US')} wakes (10 days), ${REQUESTS} sequential requests per case after 3 warm-ups\n`,
  );
  console.log(table(['filter', 'rows', 'p50 ms', 'p95 ms', 'p95 <= 100 ms'], rows));
} finally {
  await gw.stop();
  rmSync(dir, { recursive: true, force: true });
}
