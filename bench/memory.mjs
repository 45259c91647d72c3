#!/usr/bin/env node
// bench:memory — RSS of the gateway (everything on) through 60 s of full load at 50
// connections, sampled every second, and 15 s after it; and its CPU while idle before.
// BENCH_STORAGE=http: storage in another process behind ClickHouse's HTTP interface
// (CLICKHOUSE_URL; scripts/chdb-http.mjs), so the RSS is the gateway's alone.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cannon, cpuSeconds, rssMb, startFullStack, startHttpStorage, table } from './lib.mjs';

const SECONDS = Number(process.env.BENCH_MEMORY_SECONDS ?? 60);
const IDLE_SECONDS = 10;
const tmp = mkdtempSync(join(tmpdir(), 'wakegate-mem-'));
const procs = [];
try {
  const storage = process.env.BENCH_STORAGE === 'http' ? await startHttpStorage(tmp) : null;
  if (storage) procs.push(storage);
  const stack = await startFullStack(tmp, storage ? { CLICKHOUSE_URL: storage.url } : {});
  procs.push(stack.origin, stack.gateway);
  const gw = stack.gateway;
  // Idle first (after the start has settled): what the gateway's timers and the
  // engine's threads cost with no traffic.
  await new Promise((res) => setTimeout(res, 5000));
  const c0 = cpuSeconds(gw.proc.pid);
  await new Promise((res) => setTimeout(res, IDLE_SECONDS * 1000));
  const idleCpu = ((cpuSeconds(gw.proc.pid) - c0) / IDLE_SECONDS) * 100;
  const samples = [];
  const start = rssMb(gw.proc.pid);
  const timer = setInterval(() => samples.push(rssMb(gw.proc.pid)), 1000);
  const r = await cannon({
    url: `${stack.url}/x`,
    connections: 50,
    duration: SECONDS,
    headers: stack.headers,
  });
  clearInterval(timer);
  await new Promise((res) => setTimeout(res, 15_000));
  const after = rssMb(gw.proc.pid);
  const third = Math.floor(samples.length / 3);
  const avg = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const early = avg(samples.slice(0, third));
  const late = avg(samples.slice(-third));
  const peak = Math.max(...samples);
  const mean = avg(samples);
  console.log(
    `\nbench:memory — ${SECONDS} s at 50 connections, ${Math.round(r.requests.average)} req/s average, ${r.requests.total} requests${storage ? ', storage over HTTP in another process' : ''}\n`,
  );
  console.log(
    table(
      ['measure', 'MB', 'budget', 'met'],
      [
        ['RSS before load (idle)', start.toFixed(0), '', ''],
        ['RSS peak under load', peak.toFixed(0), '', ''],
        [
          'RSS peak under load, above idle',
          `+${(peak - start).toFixed(0)}`,
          '<= +120',
          peak - start <= 120 ? 'yes' : 'NO',
        ],
        [
          'RSS mean under load, above idle',
          `+${(mean - start).toFixed(0)}`,
          '<= +120',
          mean - start <= 120 ? 'yes' : 'NO',
        ],
        ['RSS mean, first third of the run', early.toFixed(0), '', ''],
        [
          'RSS mean, last third of the run',
          late.toFixed(0),
          'flat (within 10%)',
          Math.abs(late - early) / early <= 0.1 ? 'yes' : 'NO',
        ],
        ['RSS 15 s after load', after.toFixed(0), '', ''],
      ],
    ),
  );
  console.log(`\nRSS every second (MB): ${samples.map((s) => s.toFixed(0)).join(' ')}`);
  console.log(`CPU while idle (${IDLE_SECONDS} s, from 5 s after the start): ${idleCpu.toFixed(1)}% of a core`);
  if (storage)
    console.log(`Storage over HTTP (another process): RSS ${rssMb(storage.proc.pid).toFixed(0)} MB at the end`);
} finally {
  for (const p of procs.reverse()) await p.stop();
  rmSync(tmp, { recursive: true, force: true });
}
