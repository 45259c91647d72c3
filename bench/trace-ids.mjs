#!/usr/bin/env node
// What storing a wake's trace_id and span_id costs (with tracing on every wake has
// them, at any sample ratio): wakes pushed through the real batcher and write-ahead
// log into the embedded store (as bench:capture does), rounds without and with the two
// ids alternating, CPU per wake of this process (all threads: the store's too) and of
// its main thread alone (the log line, the log's writes), the store's merges of the
// following 1.5 s counted in. Runs against dist/. BENCH_WAKES (100,000 a round), BENCH_ROUNDS (7).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { median, ROOT } from './lib.mjs';

const { Batcher } = await import(join(ROOT, 'dist/capture/batcher.js'));
const { Wal } = await import(join(ROOT, 'dist/capture/wal.js'));
const { openStore } = await import(join(ROOT, 'dist/store/client.js'));
const { migrate } = await import(join(ROOT, 'dist/store/migrations.js'));
const { WakeInserter, WakeQuerier } = await import(join(ROOT, 'dist/store/wakes.js'));
const { LOG_SEGMENT_TAG, wakeLogCodec } = await import(join(ROOT, 'dist/capture/wake-log.js'));
const { newWakeId } = await import(join(ROOT, 'dist/ids.js'));
const { loadConfig } = await import(join(ROOT, 'dist/config/index.js'));
const { silentLogger } = await import(join(ROOT, 'dist/log.js'));
const { HexPool } = await import(join(ROOT, 'dist/tracing/context.js'));

const TOTAL = Number(process.env.BENCH_WAKES ?? 100_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const cfg = loadConfig();
const dir = mkdtempSync(join(tmpdir(), 'wakegate-trace-ids-'));
const store = await openStore({ ...cfg.storage, data_dir: dir });
await migrate(store);
const inserter = new WakeInserter(
  store,
  wakeLogCodec(() => 30),
);
const querier = new WakeQuerier(store);
const paths = Array.from({ length: 200 }, (_, i) => `/v2/payments/p_${i}/refunds`);
const pool = new HexPool();

const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const mainCpu = () => {
  const f = readFileSync(`/proc/${process.pid}/task/${process.pid}/stat`, 'utf8');
  const r = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(r[11]) + Number(r[12])) / 100;
};

/** One round: us of CPU per wake, [process, main thread]. */
async function round(n, ids) {
  const b = new Batcher(
    {
      batchRows: cfg.capture.batch_rows,
      flushIntervalMs: cfg.capture.flush_interval_ms,
      maxBufferedRows: Math.max(cfg.capture.max_buffered_rows, TOTAL),
      maxInflight: cfg.capture.max_inflight_batches,
      rowsInLog: true,
    },
    (rows, token, file) => inserter.insert(rows, token, file),
    new Wal(
      join(dir, 'wal', `${ids ? 't' : 'n'}${n}`),
      1e11,
      { syncIntervalMs: 10, fsyncIntervalMs: 1000, tag: LOG_SEGMENT_TAG },
      silentLogger,
      wakeLogCodec(() => 30),
    ),
    silentLogger,
  );
  const env = `e${ids ? 't' : 'n'}${n}`;
  // Drawn before the timing (minting them is the request thread's, measured in bench:tracing).
  const tids = Array.from({ length: TOTAL }, () => (ids ? [pool.take(32), pool.take(16)] : ['', '']));
  const c0 = cpu();
  const m0 = mainCpu();
  for (let i = 0; i < TOTAL; i++) {
    const now = Date.now();
    const t = tids[i];
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
      // As the recorder sets them: '' when the request takes part in no trace.
      trace_id: t[0],
      span_id: t[1],
    });
    if (i % 20_000 === 0) await new Promise((r) => setImmediate(r));
  }
  await b.stop();
  await new Promise((r) => setTimeout(r, 1500));
  const out = [((cpu() - c0) * 1e6) / TOTAL, ((mainCpu() - m0) * 1e6) / TOTAL];
  const stored = await querier.count(env);
  if (stored !== TOTAL) throw new Error(`round ${n}: stored ${stored} of ${TOTAL}`);
  return out;
}

const without = [];
const withIds = [];
try {
  await round(0, false);
  await round(0, true);
  for (let n = 1; n <= ROUNDS; n++) {
    // Which goes first turns each round.
    if (n % 2) {
      without.push(await round(n, false));
      withIds.push(await round(n, true));
    } else {
      withIds.push(await round(n, true));
      without.push(await round(n, false));
    }
  }
  const col = (rows, k) => rows.map((r) => r[k]);
  const fmt = (xs) => xs.map((x) => x.toFixed(2)).join(' / ');
  console.log(
    `\nbench trace-ids — ${ROUNDS} rounds of ${TOTAL.toLocaleString('en-US')} wakes each way; load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );
  for (const [k, name] of [
    [0, 'process'],
    [1, 'main thread'],
  ]) {
    const a = col(without, k);
    const t = col(withIds, k);
    const added = t.map((x, i) => x - (a[i] ?? 0));
    console.log(`${name}, us per wake: without ids ${median(a).toFixed(2)} (${fmt(a)})`);
    console.log(`${name}, us per wake: with ids    ${median(t).toFixed(2)} (${fmt(t)})`);
    console.log(`${name}, added (paired rounds, median): ${median(added).toFixed(2)} (${fmt(added)})\n`);
  }
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
