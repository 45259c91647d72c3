#!/usr/bin/env node
// bench:scale — the full gateway (everything on) at 1, 2, 4 … edge threads, up to
// the machine's cores: req/s at 64 connections, the gateway's CPU per request, and
// its idle RSS (what each extra thread costs in memory). Where the machine has cores
// to spare (threads + 2 or more), the gateway is pinned to its own cores and the load
// generator and origin to the rest (taskset), so the load does not steal the
// gateway's cores; on smaller machines nothing is pinned, and the table says so.
// Edge threads need Node 22.12 or later: run with the Node of scripts/test-on-lts.sh.
// Run: npm run bench:scale (BENCH_DURATION, BENCH_ROUNDS, BENCH_MAX_THREADS)
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { hasReusePort } from '../dist/startup.js';
import { cannon, median, startBenchGateway, startOrigin, table, treeCpuSeconds } from './lib.mjs';

const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = 64;
const cores = availableParallelism();
const max = Math.min(cores, Number(process.env.BENCH_MAX_THREADS ?? cores));
// BENCH_THREADS=1,2,3,4: these thread counts instead (more threads than cores still shows their memory).
const counts = process.env.BENCH_THREADS ? process.env.BENCH_THREADS.split(',').map(Number) : [];
if (counts.length === 0) {
  for (let t = 1; t <= max; t *= 2) counts.push(t);
  if (counts.at(-1) !== max) counts.push(max);
}

const tmp = mkdtempSync(join(tmpdir(), 'wakegate-scale-'));

/** Pins every thread of `pid` (and its children) to `cpus` ("0-3"); false where taskset is missing. */
function pin(pid, cpus) {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

async function main() {
  if (!hasReusePort()) {
    console.log(
      `Node ${process.versions.node} has no reusePort: every thread count would run as 1. Run on Node >= 22.12.`,
    );
    return;
  }
  const origin = await startOrigin();
  const rows = [];
  let one = null;
  let oneRss = null;
  let last = null;
  for (const threads of counts) {
    const g = await startBenchGateway(join(tmp, `t${threads}`), origin.url, 'required', '', {}, threads);
    const spare = cores >= threads + 2;
    let pinned = 'no (too few cores)';
    if (spare) {
      const gw = `0-${threads - 1}`;
      const rest = `${threads}-${cores - 1}`;
      pinned =
        pin(g.gateway.proc.pid, gw) && pin(origin.proc.pid, rest) && pin(process.pid, rest)
          ? `gateway ${gw}, load+origin ${rest}`
          : 'no (taskset failed)';
    }
    await new Promise((r) => setTimeout(r, 1500));
    const rss = rssMb(g.gateway.proc.pid);
    await cannon({ url: `${g.url}/warm`, connections: CONNECTIONS, duration: 3, headers: g.headers });
    const rps = [];
    const cpu = [];
    for (let round = 0; round < ROUNDS; round++) {
      const c0 = treeCpuSeconds(g.gateway.proc.pid);
      const r = await cannon({
        url: `${g.url}/bench/items`,
        connections: CONNECTIONS,
        duration: DURATION,
        headers: g.headers,
      });
      cpu.push(((treeCpuSeconds(g.gateway.proc.pid) - c0) * 1e6) / Math.max(1, r.requests.total));
      rps.push(r.requests.average);
    }
    await g.gateway.stop('SIGTERM');
    const m = median(rps);
    const prev = last;
    last = { rss, threads };
    const prevRss = prev?.rss ?? null;
    const prevThreads = prev?.threads ?? 0;
    one ??= m;
    oneRss ??= rss;
    rows.push([
      String(threads),
      pinned,
      Math.round(m).toLocaleString('en-US'),
      rps.map((x) => Math.round(x)).join(' / '),
      `${(m / one).toFixed(2)}x`,
      median(cpu).toFixed(0),
      rss.toFixed(0),
      threads > 1 ? ((rss - oneRss) / (threads - 1)).toFixed(1) : '-',
      prevRss === null ? '-' : ((rss - prevRss) / (threads - prevThreads)).toFixed(1),
    ]);
  }
  await origin.stop('SIGTERM');
  console.log(
    `\nbench:scale — ${cores} cores; ${ROUNDS} rounds of ${DURATION}s at ${CONNECTIONS} connections; medians\n`,
  );
  console.log(
    table(
      [
        'edge threads',
        'pinned',
        'req/s (median)',
        'rounds',
        'x one thread',
        'CPU us/req',
        'idle RSS MB',
        'MB per thread over 1',
        'MB per thread over the row above',
      ],
      rows,
    ),
  );
}

try {
  await main();
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
