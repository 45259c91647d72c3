#!/usr/bin/env node
// bench:proxy — throughput at 50 connections and p50/p99 latency at a fixed
// request rate (an open-loop load, bench/steady.mjs: evenly spaced, latency from
// when each request was due), for the origin direct, wakegate (everything on), wakegate
// pass-through (auth: none), bare http-proxy-3, fastify + @fastify/reply-from and
// nginx (when installed), side by side in one run: warm-up, interleaved rounds,
// medians; and each Node target's own event-loop delay p99 at the fixed rate.
// Every server is its own process; autocannon runs in this one.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hasReusePort } from '../dist/startup.js';
import {
  cannon,
  freePort,
  loopDelay,
  median,
  ROOT,
  signalTree,
  startBenchGateway,
  startHttpStorage,
  startOrigin,
  startProcess,
  table,
  treeCpuSeconds,
} from './lib.mjs';
import { steady } from './steady.mjs';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const RATE = Number(process.env.BENCH_RATE ?? 2000);
const CONNECTIONS = 50;
// BENCH_ISOLATE=1: each target is measured with the others stopped (SIGSTOP, then
// SIGCONT), so one gateway's storage merges and timers do not run on the cores while
// another is measured. Off by default: its first run (2026-11-28, bench/RESULTS.md)
// spread as widely as the host's noise, so it is not yet shown to help.
const ISOLATE = process.env.BENCH_ISOLATE === '1';
const node = process.execPath;
const tmp = mkdtempSync(join(tmpdir(), 'wakegate-bench-'));
const procs = [];

function hasNginx() {
  try {
    execFileSync('nginx', ['-v'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function main() {
  const originProc = await startOrigin();
  procs.push(originProc);
  const origin = originProc.url;
  const targets = [{ name: 'direct', url: origin, headers: {} }];

  // wakegate, everything on: keyed route, scope check, rate limit, capture, metrics.
  // Every Node target samples its own event-loop delay (bench/servers/loop-delay.mjs).
  const probe = (name) => loopDelay(join(tmp, `${name}.loop-delay.json`));
  const fullLd = probe('full');
  const full = await startBenchGateway(join(tmp, 'full'), origin, 'required', '', fullLd.env, 1);
  procs.push(full.gateway);
  targets.push({
    name: 'wakegate (full)',
    url: full.url,
    headers: full.headers,
    proc: full.gateway,
    pid: full.gateway.proc.pid,
    dataDir: full.dataDir,
    ops: full.opsUrl,
    loop: fullLd,
  });
  // The full gateway with two edge threads, where this Node can share a port between
  // threads (22.12 or later: run the bench with the Node of scripts/test-on-lts.sh).
  if (hasReusePort()) {
    const twoLd = probe('full2');
    const two = await startBenchGateway(join(tmp, 'full2'), origin, 'required', '', twoLd.env, 2);
    procs.push(two.gateway);
    targets.push({
      name: 'wakegate (full, 2 threads)',
      url: two.url,
      headers: two.headers,
      pid: two.gateway.proc.pid,
    });
  } else {
    console.log(
      `Node ${process.versions.node} has no reusePort: wakegate with 2 threads skipped (run on Node >= 22.12)`,
    );
  }
  // BENCH_HTTP_STORAGE=1: the full gateway again, with its storage in another process
  // behind ClickHouse's HTTP interface (CLICKHOUSE_URL), to show the gateway's own cost.
  if (process.env.BENCH_HTTP_STORAGE === '1') {
    const storage = await startHttpStorage(tmp);
    procs.push(storage);
    const httpLd = probe('http');
    const g = await startBenchGateway(join(tmp, 'http'), origin, 'required', '', {
      ...httpLd.env,
      CLICKHOUSE_URL: storage.url,
    });
    procs.push(g.gateway);
    targets.push({
      name: 'wakegate (full, storage over HTTP)',
      url: g.url,
      headers: g.headers,
      pid: g.gateway.proc.pid,
      loop: httpLd,
      storagePid: storage.proc.pid,
    });
  }
  const passLd = probe('pass');
  const pass = await startBenchGateway(join(tmp, 'pass'), origin, 'none', '', passLd.env);
  procs.push(pass.gateway);
  targets.push({
    name: 'wakegate (pass-through)',
    url: pass.url,
    headers: {},
    pid: pass.gateway.proc.pid,
    loop: passLd,
  });

  /** A Node proxy of bench/servers/, in front of the origin, sampling its own loop delay. */
  const peer = async (name, script) => {
    const port = await freePort();
    const loop = probe(script);
    const p = await startProcess(
      name,
      node,
      [join(ROOT, 'bench/servers', `${script}.mjs`)],
      { ...loop.env, PORT: String(port), TARGET: origin },
      `http://127.0.0.1:${port}/`,
    );
    procs.push(p);
    targets.push({ name, url: `http://127.0.0.1:${port}`, headers: {}, pid: p.proc.pid, loop });
  };
  // The floor: node:http + undici Pool.dispatch, no features (the core wakegate is built on).
  await peer('bare undici', 'bare-undici');
  await peer('http-proxy-3', 'http-proxy-3');
  await peer('fastify + reply-from', 'reply-from');

  /** nginx with `workers` worker processes in front of the origin (its CPU is its whole process tree). */
  const startNginx = async (workers) => {
    const nPort = await freePort();
    const nDir = join(tmp, `nginx-${workers}`);
    mkdirSync(nDir);
    writeFileSync(
      join(nDir, 'nginx.conf'),
      `worker_processes ${workers};
pid ${nDir}/nginx.pid;
error_log ${nDir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${nDir}/body; proxy_temp_path ${nDir}/proxy; fastcgi_temp_path ${nDir}/fcgi;
  uwsgi_temp_path ${nDir}/uwsgi; scgi_temp_path ${nDir}/scgi;
  upstream origin { server ${new URL(origin).host}; keepalive 256; }
  server {
    listen 127.0.0.1:${nPort}${workers > 1 ? ' reuseport' : ''};
    keepalive_requests 1000000;
    location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`,
    );
    procs.push(
      await startProcess(
        'nginx',
        'nginx',
        ['-p', nDir, '-c', join(nDir, 'nginx.conf'), '-g', 'daemon off;'],
        {},
        `http://127.0.0.1:${nPort}/`,
      ),
    );
    targets.push({
      name: workers === 1 ? 'nginx (1 worker)' : `nginx (${workers} workers)`,
      url: `http://127.0.0.1:${nPort}`,
      headers: {},
      pid: procs.at(-1).proc.pid,
    });
  };
  if (hasNginx()) {
    for (const workers of [1, 2]) await startNginx(workers);
  } else {
    console.log('nginx not installed: skipped (apt-get install nginx to include it)');
  }

  const results = Object.fromEntries(
    targets.map((t) => [
      t.name,
      { rps: [], cpu: [], storageCpu: [], p50: [], p99: [], loop: [], late: [], ok2xx: 0, errors: 0, non2xx: 0 },
    ]),
  );
  const tally = (t, r) => {
    const s = results[t.name];
    s.ok2xx += r['2xx'];
    s.errors += r.errors + r.timeouts;
    s.non2xx += r.non2xx;
  };
  for (const t of targets) {
    process.stderr.write(`warm-up ${t.name}\n`);
    tally(t, await cannon({ url: `${t.url}/warm`, connections: CONNECTIONS, duration: WARMUP, headers: t.headers }));
  }
  /** Every process of the targets other than `t` (the shared origin runs on). */
  const others = (t) => targets.filter((u) => u !== t).flatMap((u) => [u.pid, u.storagePid].filter(Boolean));
  /** Stops the other targets while `t` is measured; the returned function lets them go on. */
  const alone = async (t) => {
    if (!ISOLATE) return () => {};
    const held = others(t);
    for (const pid of held) signalTree(pid, 'SIGSTOP');
    // `t` itself was stopped while the others ran: its late timers run before it is measured.
    await new Promise((r) => setTimeout(r, 300));
    return () => {
      for (const pid of held) signalTree(pid, 'SIGCONT');
    };
  };
  if (ISOLATE) console.log('each target measured with the others stopped (BENCH_ISOLATE=1)');
  for (let round = 1; round <= ROUNDS; round++) {
    // Interleaved, and the order turns each round so no target always goes first.
    const order = targets.map((_, i) => targets[(i + round) % targets.length]);
    for (const t of order) {
      process.stderr.write(`round ${round}: throughput ${t.name}\n`);
      const resume = await alone(t);
      const c0 = t.pid ? treeCpuSeconds(t.pid) : 0;
      const s0 = t.storagePid ? treeCpuSeconds(t.storagePid) : 0;
      const r = await cannon({
        url: `${t.url}/bench/items?id=${round}`,
        connections: CONNECTIONS,
        duration: DURATION,
        headers: t.headers,
      });
      // The proxy's own CPU (all threads, and nginx's worker) per request served: not moved by how busy the cores are.
      if (t.pid) results[t.name].cpu.push(((treeCpuSeconds(t.pid) - c0) * 1e6) / Math.max(1, r.requests.total));
      if (t.storagePid)
        results[t.name].storageCpu.push(((treeCpuSeconds(t.storagePid) - s0) * 1e6) / Math.max(1, r.requests.total));
      resume();
      tally(t, r);
      results[t.name].rps.push(r.requests.average);
    }
    for (const t of order) {
      process.stderr.write(`round ${round}: latency at ${RATE}/s ${t.name}\n`);
      const resume = await alone(t);
      if (t.loop) await t.loop.take(t.pid);
      const r = await steady({
        url: `${t.url}/bench/items?id=${round}`,
        connections: 20,
        rate: RATE,
        duration: DURATION,
        headers: t.headers,
      });
      results[t.name].late.push(r.late);
      tally(t, r);
      results[t.name].p50.push(r.latency.p50);
      results[t.name].p99.push(r.latency.p99);
      if (t.loop) results[t.name].loop.push((await t.loop.take(t.pid)).p99);
      resume();
    }
  }

  // Completeness: every request the full gateway served (its own counter, read after
  // the load and before a clean stop) is a stored wake.
  const fullT = targets.find((t) => t.proc);
  const metricsText = await (await fetch(`${fullT.ops}/metrics`)).text();
  const served = [...metricsText.matchAll(/^wakegate_requests_total\{route="bench"[^}]*\} (\d+)/gm)].reduce(
    (a, m) => a + Number(m[1]),
    0,
  );
  const exit = await fullT.proc.stop('SIGTERM');
  const { openStore } = await import(join(ROOT, 'dist/store/client.js'));
  const store = await openStore({ data_dir: fullT.dataDir, clickhouse_url: null, clickhouse_database: 'wakegate' });
  const rs = await store.client.query({
    query: "SELECT count() AS c FROM wakegate.wakes WHERE route = 'bench'",
    format: 'JSONEachRow',
  });
  const stored = Number((await rs.json())[0].c);
  await store.close();

  const m = (name, k) => median(results[name][k]);
  const hp = m('http-proxy-3', 'rps');
  const rf = m('fastify + reply-from', 'rps');
  const ng = results['nginx (1 worker)'] ? m('nginx (1 worker)', 'rps') : null;
  const directP99 = m('direct', 'p99');
  const bare = m('bare undici', 'rps');
  const bareCpu = m('bare undici', 'cpu');
  const rows = targets.map((t) => {
    const rps = m(t.name, 'rps');
    return [
      t.name,
      Math.round(rps).toLocaleString('en-US'),
      results[t.name].rps.map((x) => Math.round(x)).join(' / '),
      t.pid ? m(t.name, 'cpu').toFixed(0) : '-',
      (rps / bare).toFixed(2),
      (rps / hp).toFixed(2),
      (rps / rf).toFixed(2),
      ng ? (rps / ng).toFixed(2) : 'n/a',
      m(t.name, 'p50').toFixed(1),
      m(t.name, 'p99').toFixed(1),
      (m(t.name, 'p99') - directP99).toFixed(1),
      t.loop ? m(t.name, 'loop').toFixed(1) : '-',
      String(m(t.name, 'late')),
      String(results[t.name].errors + results[t.name].non2xx),
    ];
  });
  const fullRps = m('wakegate (full)', 'rps');
  const passRps = m('wakegate (pass-through)', 'rps');
  console.log(
    `\nbench:proxy — ${ROUNDS} interleaved rounds of ${DURATION}s after ${WARMUP}s warm-up; ${CONNECTIONS} connections; latency at ${RATE} req/s evenly spaced (20 connections, from when each was due); medians\n`,
  );
  console.log(
    table(
      [
        'target',
        'req/s (median)',
        'rounds',
        'CPU us/req',
        'x bare undici',
        'x http-proxy-3',
        'x reply-from',
        'x nginx',
        'p50 ms @rate',
        'p99 ms @rate',
        'p99 added vs direct',
        'loop delay p99 ms @rate',
        'sent 1 ms late @rate',
        'errors+non2xx',
      ],
      rows,
    ),
  );
  for (const t of targets.filter((x) => x.storagePid))
    console.log(
      `\n${t.name}: the storage process used ${m(t.name, 'storageCpu').toFixed(0)} us of CPU per request besides the gateway's ${m(t.name, 'cpu').toFixed(0)}.`,
    );
  const fullCpu = m('wakegate (full)', 'cpu');
  const two = results['wakegate (full, 2 threads)'] ? 'wakegate (full, 2 threads)' : null;
  const ng2 = results['nginx (2 workers)'] ? m('nginx (2 workers)', 'rps') : null;
  const lines = [
    [
      '2 edge threads: CPU per request <= 1.1x one thread',
      two ? `${(m(two, 'cpu') / fullCpu).toFixed(2)}x` : 'n/a',
      two ? m(two, 'cpu') / fullCpu <= 1.1 : null,
    ],
    [
      '2 edge threads: throughput >= 1.5x one thread',
      two ? `${(m(two, 'rps') / fullRps).toFixed(2)}x` : 'n/a',
      two ? m(two, 'rps') / fullRps >= 1.5 : null,
    ],
    ['(nginx 2 workers vs 1, the same cores)', ng && ng2 ? `${(ng2 / ng).toFixed(2)}x` : 'n/a', null],
    ['full CPU per request <= 1.3x bare undici', `${(fullCpu / bareCpu).toFixed(2)}x`, fullCpu / bareCpu <= 1.3],
    ['full throughput >= 0.85x bare undici', `${(fullRps / bare).toFixed(2)}x`, fullRps / bare >= 0.85],
    ['full vs pass-through within 10%', `${((1 - fullRps / passRps) * 100).toFixed(1)}%`, 1 - fullRps / passRps <= 0.1],
    ['full >= 2x bare http-proxy-3', (fullRps / hp).toFixed(2), fullRps / hp >= 2],
    ['full >= 1.5x fastify + reply-from', (fullRps / rf).toFixed(2), fullRps / rf >= 1.5],
    ['full >= 0.5x nginx', ng ? (fullRps / ng).toFixed(2) : 'n/a', ng ? fullRps / ng >= 0.5 : null],
    [
      'cost of every feature (full vs pass-through) <= 15%',
      `${((1 - fullRps / passRps) * 100).toFixed(1)}%`,
      1 - fullRps / passRps <= 0.15,
    ],
    [
      'p99 added at the fixed rate <= 2 ms',
      `${(m('wakegate (full)', 'p99') - directP99).toFixed(1)} ms`,
      m('wakegate (full)', 'p99') - directP99 <= 2,
    ],
    [
      '100% of wakes captured (stored wakes / requests served)',
      `${stored} / ${served}`,
      stored === served && served > 0,
    ],
  ];
  console.log(
    `\n${table(
      ['budget line', 'measured', 'met'],
      lines.map(([a, b, c]) => [a, b, c === null ? 'n/a' : c ? 'yes' : 'NO']),
    )}`,
  );
  console.log(`\n(wakegate stopped with exit code ${exit})`);
  mkdirSync(join(ROOT, 'bench/out'), { recursive: true });
  writeFileSync(join(ROOT, 'bench/out/proxy.json'), JSON.stringify({ results, stored, served, lines }, null, 2));
}

try {
  await main();
} finally {
  for (const p of procs.reverse()) await p.stop('SIGTERM');
  rmSync(tmp, { recursive: true, force: true });
}
