#!/usr/bin/env node
// bench:threads — where the full gateway's CPU goes, by thread: one load of
// BENCH_DURATION s at 50 connections against an origin answering BODY_BYTES of JSON
// (32,000 by default; DETAIL=off turns wake detail off), then each thread's
// user+system time per request served, grouped by thread name: the main thread
// (JavaScript), "node" (V8's GC helpers and libuv's pool) and the embedded engine's
// own threads (inserts, merges), user and system time apart. Also the RSS and the JS heap and external memory.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cannon, DETAIL_OFF_YAML, startBenchGateway, startOrigin, table, threadTicks } from './lib.mjs';

const SIZE = Number(process.env.BODY_BYTES ?? 32_000);
const DETAIL = process.env.DETAIL !== 'off';
const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const TICK_US = 1e6 / 100; // /proc reports CPU time in clock ticks (USER_HZ = 100)

/** CPU ticks of each thread of a process, summed by thread name (the main thread apart). */
function threads(pid) {
  const out = {};
  for (const { tid, name, user, sys } of threadTicks(pid)) {
    const key = tid === String(pid) ? 'main thread' : name.replace(/\d+$/, '');
    const t = out[key] ?? { user: 0, sys: 0 };
    t.user += user;
    t.sys += sys;
    out[key] = t;
  }
  return out;
}

const status = (pid, field) =>
  Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

const tmp = mkdtempSync(join(tmpdir(), 'wakegate-threads-'));
const procs = [];
try {
  const origin = await startOrigin(SIZE);
  procs.push(origin);
  const g = await startBenchGateway(join(tmp, 'gateway'), origin.url, 'required', DETAIL ? '' : DETAIL_OFF_YAML);
  procs.push(g.gateway);
  const pid = g.gateway.proc.pid;
  await cannon({ url: `${g.url}/warm`, connections: 50, duration: 2, headers: g.headers });
  const before = threads(pid);
  const r = await cannon({ url: `${g.url}/bench/items?id=1`, connections: 50, duration: DURATION, headers: g.headers });
  const after = threads(pid);
  const metrics = await (await fetch(`${g.opsUrl}/metrics`)).text();
  const metric = (name) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(metrics)?.[1] ?? Number.NaN) / 1048576;
  const n = Math.max(1, r.requests.total);
  const per = (k, f) => ((after[k][f] - (before[k]?.[f] ?? 0)) * TICK_US) / n;
  const rows = Object.keys(after)
    .map((k) => [k, per(k, 'user') + per(k, 'sys'), per(k, 'user'), per(k, 'sys')])
    .filter(([, us]) => us >= 0.5)
    .sort((a, b) => b[1] - a[1]);
  const sum = (i) => rows.reduce((a, r) => a + r[i], 0);
  console.log(
    `\nbench:threads — ${SIZE.toLocaleString('en')}-byte JSON answers, detail ${DETAIL ? 'on' : 'off'}, ${DURATION} s at 50 connections: ${Math.round(r.requests.average).toLocaleString('en')} req/s, ${r.errors + r.non2xx} errors\n`,
  );
  console.log(
    table(
      ['thread', 'CPU us per request', 'user', 'system'],
      [
        ...rows.map(([k, ...us]) => [k, ...us.map((x) => x.toFixed(1))]),
        ['all threads', ...[1, 2, 3].map((i) => sum(i).toFixed(1))],
      ],
    ),
  );
  console.log(
    `\nRSS ${status(pid, 'VmRSS').toFixed(0)} MB (peak ${status(pid, 'VmHWM').toFixed(0)} MB); JS heap ${metric('wakegate_nodejs_heap_size_total_bytes').toFixed(0)} MB, external ${metric('wakegate_nodejs_external_memory_bytes').toFixed(0)} MB`,
  );
} finally {
  for (const p of procs.reverse()) await p.stop('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
}
