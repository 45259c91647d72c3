#!/usr/bin/env node
// bench:capture — wakes a second into the embedded store through the real batcher
// (Batcher + WakeInserter, default capture settings), and completeness: every wake
// pushed is stored exactly once. Runs against dist/.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median, ROOT, table } from './lib.mjs';

const { Batcher } = await import(join(ROOT, 'dist/capture/batcher.js'));
const { Spool } = await import(join(ROOT, 'dist/capture/spool.js'));
const { openStore } = await import(join(ROOT, 'dist/store/client.js'));
const { migrate } = await import(join(ROOT, 'dist/store/migrations.js'));
const { WakeInserter, WakeQuerier } = await import(join(ROOT, 'dist/store/wakes.js'));
const { newWakeId } = await import(join(ROOT, 'dist/ids.js'));
const { loadConfig } = await import(join(ROOT, 'dist/config/index.js'));
const { silentLogger } = await import(join(ROOT, 'dist/log.js'));

const TOTAL = Number(process.env.BENCH_WAKES ?? 1_000_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const cfg = loadConfig();
const dir = mkdtempSync(join(tmpdir(), 'wakegate-capture-'));
const store = await openStore({ ...cfg.storage, data_dir: dir });
await migrate(store);
const inserter = new WakeInserter(store, () => 30);
const querier = new WakeQuerier(store);
const paths = Array.from({ length: 200 }, (_, i) => `/v2/payments/p_${i}/refunds`);
const rates = [];
let expected = 0;
try {
  for (let round = 1; round <= ROUNDS; round++) {
    const b = new Batcher(
      {
        batchRows: cfg.capture.batch_rows,
        flushIntervalMs: cfg.capture.flush_interval_ms,
        maxBufferedRows: Math.max(cfg.capture.max_buffered_rows, TOTAL),
        maxInflight: cfg.capture.max_inflight_batches,
      },
      (rows, token) => inserter.insert(rows, token),
      new Spool(join(dir, 'spool'), 1e9),
      silentLogger,
    );
    const env = `bench${round}`;
    const t0 = performance.now();
    for (let i = 0; i < TOTAL; i++) {
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
      });
      // Yield now and then, as a live gateway's event loop would.
      if (i % 20_000 === 0) await new Promise((r) => setImmediate(r));
    }
    await b.stop();
    const secs = (performance.now() - t0) / 1000;
    rates.push(TOTAL / secs);
    expected += TOTAL;
    const stored = await querier.count(env);
    if (stored !== TOTAL || b.stats.dropped !== 0)
      throw new Error(`round ${round}: stored ${stored} of ${TOTAL}, dropped ${b.stats.dropped}`);
    process.stderr.write(`round ${round}: ${Math.round(TOTAL / secs)} wakes/s, ${stored} stored\n`);
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
        ['stored / pushed', `${total} / ${expected}`, 'equal', total === expected ? 'yes' : 'NO'],
      ],
    ),
  );
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
