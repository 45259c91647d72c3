#!/usr/bin/env node
// bench:capture — wakes a second into the embedded store through the real batcher
// and write-ahead log (Batcher + Wal + WakeInserter, default capture settings, set up
// as the gateway sets them), with and without wake detail (1 KB response bodies and
// headers), and completeness: every wake pushed is stored exactly once. Runs against dist/.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median, ROOT, table } from './lib.mjs';

const { Batcher } = await import(join(ROOT, 'dist/capture/batcher.js'));
const { Wal } = await import(join(ROOT, 'dist/capture/wal.js'));
const { openStore } = await import(join(ROOT, 'dist/store/client.js'));
const { migrate } = await import(join(ROOT, 'dist/store/migrations.js'));
const { WakeInserter, WakeQuerier } = await import(join(ROOT, 'dist/store/wakes.js'));
const { LOG_SEGMENT_TAG, wakeLogCodec } = await import(join(ROOT, 'dist/capture/wake-log.js'));
const { newWakeId } = await import(join(ROOT, 'dist/ids.js'));
const { loadConfig } = await import(join(ROOT, 'dist/config/index.js'));
const { silentLogger } = await import(join(ROOT, 'dist/log.js'));

const TOTAL = Number(process.env.BENCH_WAKES ?? 1_000_000);
const TOTAL_DETAIL = Number(process.env.BENCH_DETAIL_WAKES ?? 200_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const cfg = loadConfig();
const dir = mkdtempSync(join(tmpdir(), 'wakegate-capture-'));
const store = await openStore({ ...cfg.storage, data_dir: dir });
await migrate(store);
const inserter = new WakeInserter(
  store,
  wakeLogCodec(() => 30),
);
const querier = new WakeQuerier(store);
const paths = Array.from({ length: 200 }, (_, i) => `/v2/payments/p_${i}/refunds`);
const body = JSON.stringify({ data: 'x'.repeat(1000 - 12) });
const detail = {
  query: '?page=2',
  request_headers: [
    ['host', 'api.example.com'],
    ['accept', '*/*'],
    ['user-agent', 'bench/1.0'],
    ['authorization', '[redacted:0123456789ab]'],
    ['x-request-id', 'r-1'],
  ],
  response_headers: [
    ['content-type', 'application/json'],
    ['content-length', '1000'],
    ['date', 'Sun, 22 Nov 2026 12:00:00 GMT'],
  ],
  request_body: null,
  response_body: { data: Buffer.from(body), bytes: 1000, truncated: false, encoding: 'utf8' },
  diff: null,
};
const rates = [];
const detailRates = [];
let expected = 0;
async function round(n, total, withDetail) {
  const b = new Batcher(
    {
      batchRows: cfg.capture.batch_rows,
      flushIntervalMs: cfg.capture.flush_interval_ms,
      maxBufferedRows: Math.max(cfg.capture.max_buffered_rows, total),
      maxInflight: cfg.capture.max_inflight_batches,
      rowsInLog: true,
    },
    (rows, token, file) => inserter.insert(rows, token, file),
    new Wal(
      join(dir, 'wal', `${withDetail ? 'd' : 'w'}${n}`),
      1e11,
      { syncIntervalMs: 10, fsyncIntervalMs: 1000, tag: LOG_SEGMENT_TAG },
      silentLogger,
      wakeLogCodec(() => 30),
    ),
    silentLogger,
  );
  const env = `bench${withDetail ? 'd' : ''}${n}`;
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const now = Date.now();
    b.push({
      id: newWakeId(now),
      method: i % 5 ? 'GET' : 'POST',
      path: paths[i % 200],
      route: 'payments',
      status: i % 50 ? 200 : 503,
      latency_ms: i % 300,
      consumer: `consumer-${i % 1000}`,
      key_id: `key_${String(i % 1000).padStart(20, '0')}`,
      environment: env,
      region: 'local',
      captured_at: now,
      request_bytes: 120,
      response_bytes: 1024,
      client_ip: '10.1.2.3',
      user_agent: 'bench/1.0',
      retention_days: 30,
      ...(withDetail ? { detail } : {}),
    });
    // Yield now and then, as a live gateway's event loop would.
    if (i % 20_000 === 0) await new Promise((r) => setImmediate(r));
  }
  await b.stop();
  const secs = (performance.now() - t0) / 1000;
  expected += total;
  const stored = await querier.count(env);
  if (stored !== total || b.stats.dropped !== 0)
    throw new Error(`round ${n}: stored ${stored} of ${total}, dropped ${b.stats.dropped}`);
  process.stderr.write(
    `round ${n}${withDetail ? ' (detail)' : ''}: ${Math.round(total / secs)} wakes/s, ${stored} stored\n`,
  );
  return total / secs;
}
try {
  for (let n = 1; n <= ROUNDS; n++) {
    rates.push(await round(n, TOTAL, false));
    detailRates.push(await round(n, TOTAL_DETAIL, true));
  }
  const total = await querier.count();
  console.log(
    `\nbench:capture — ${ROUNDS} rounds of ${TOTAL.toLocaleString('en-US')} wakes through the batcher (batch_rows ${cfg.capture.batch_rows}, flush ${cfg.capture.flush_interval_ms} ms) into embedded chDB\n`,
  );
  console.log(
    table(
      ['measure', 'value', 'budget', 'met'],
      [
        [
          'wakes/s (median)',
          Math.round(median(rates)).toLocaleString('en-US'),
          '>= 200,000',
          median(rates) >= 200_000 ? 'yes' : 'NO',
        ],
        ['rounds', rates.map((r) => Math.round(r).toLocaleString('en-US')).join(' / '), '', ''],
        [
          'wakes/s with detail (1 KB body and headers, median)',
          Math.round(median(detailRates)).toLocaleString('en-US'),
          '',
          '',
        ],
        ['stored / pushed', `${total} / ${expected}`, 'equal', total === expected ? 'yes' : 'NO'],
      ],
    ),
  );
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
