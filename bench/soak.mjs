#!/usr/bin/env node
// bench:soak — the gateway (everything on) for 10 minutes at half of its measured
// maximum throughput, reporting per minute: RSS, event-loop delay (from its own
// /metrics) and latency. All should stay flat.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cannon, rssMb, startFullStack, table } from './lib.mjs';

const MINUTES = Number(process.env.BENCH_SOAK_MINUTES ?? 10);
const tmp = mkdtempSync(join(tmpdir(), 'wakegate-soak-'));
const procs = [];
try {
  const stack = await startFullStack(tmp);
  procs.push(stack.origin, stack.gateway);
  const gw = stack.gateway;
  const headers = stack.headers;
  const port = new URL(stack.url).port;
  const ops = new URL(stack.opsUrl).port;
  const max = (await cannon({ url: `http://127.0.0.1:${port}/max`, connections: 50, duration: 10, headers })).requests
    .average;
  const rate = Math.round(max / 2);
  process.stderr.write(`max ${Math.round(max)} req/s; soaking at ${rate} req/s for ${MINUTES} min\n`);
  const rows = [];
  for (let m = 1; m <= MINUTES; m++) {
    const r = await cannon({
      url: `http://127.0.0.1:${port}/soak/${m}`,
      connections: 20,
      overallRate: rate,
      duration: 60,
      headers,
    });
    const metrics = await (await fetch(`http://127.0.0.1:${ops}/metrics`)).text();
    const lag = (name) => Number(new RegExp(`^${name} ([0-9.e-]+)`, 'm').exec(metrics)?.[1] ?? Number.NaN) * 1000;
    const mb = (name) =>
      (
        Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)`, 'm').exec(metrics)?.[1] ?? Number.NaN) / 1048576
      ).toFixed(0);
    rows.push([
      String(m),
      Math.round(r.requests.average).toLocaleString('en-US'),
      rssMb(gw.proc.pid).toFixed(0),
      mb('wakegate_nodejs_heap_size_used_bytes'),
      mb('wakegate_nodejs_external_memory_bytes'),
      lag('wakegate_nodejs_eventloop_lag_p50_seconds').toFixed(1),
      lag('wakegate_nodejs_eventloop_lag_p99_seconds').toFixed(1),
      String(r.latency.p50),
      String(r.latency.p99),
      String(r.errors + r.non2xx),
    ]);
    process.stderr.write(`minute ${m}: ${rows[rows.length - 1].join(' ')}\n`);
  }
  console.log(
    `\nbench:soak — ${MINUTES} min at ${rate} req/s (half of the measured ${Math.round(max)} req/s), everything on\n`,
  );
  console.log(
    table(
      [
        'minute',
        'req/s',
        'RSS MB',
        'JS heap used MB',
        'external MB',
        'loop delay p50 ms',
        'loop delay p99 ms',
        'latency p50 ms',
        'latency p99 ms',
        'errors',
      ],
      rows,
    ),
  );
} finally {
  for (const p of procs.reverse()) await p.stop();
  rmSync(tmp, { recursive: true, force: true });
}
