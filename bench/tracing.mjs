#!/usr/bin/env node
// bench:tracing — what tracing costs: the gateway process's CPU per request
// (utime + stime of all its threads, /proc/<pid>/stat, before and after a load of fixed
// duration at 50 connections), and its main thread's alone (the JavaScript: with
// threads: 1 it proxies, builds and exports; not the storage engine's threads),
// with tracing off, at 1% and at 100% head sampling, side by side in one run (by
// default each round loads them all at once, each at the same fixed rate, so every one
// sees the same host at the same moment and does the same work a second: on a shared
// 2-core host, one at a time as fast as they answer gave rounds 1.7x apart and rows
// compared at different throughputs; each is compared with off in the same round,
// medians of the rounds; BENCH_TOGETHER=0 loads them one at a time, the order turning), each
// exporting to a local OTLP receiver that decodes every request with the OpenTelemetry
// project's generated definitions and counts the spans; then the request thread's own
// added cost in ns (a micro-bench of the id minting and the traceparent header), and
// the control thread's per exported request (`--micro`: these two alone). `--paired`:
// sampling's cost flat out in one process (sampled against not-sampled requests on one
// gateway, beside one with tracing off; see paired() below). Targets:
// <= 3% more CPU at 1%, <= 10% at 100%, <= 0.5 us on the request thread.
// BENCH_DURATION (s, 8), BENCH_BLOCKS (3: each starts every gateway afresh), BENCH_ROUNDS
// (3 a block), BENCH_WARMUP (s, 5, all at once), BENCH_LOAD_RATE (req/s
// each, 1500, which this 2-core host sustains for all four at once; 0: as fast as they answer). At a fixed rate a request costs more than
// flat out (the per-second work is spread over fewer), so the table also gives the
// added microseconds.
// Controls: BENCH_AA=1 (four gateways alike, tracing off: what the bench puts between
// rows) and BENCH_IDS=1 (off with a header of a traceparent's length that stores nothing,
// against one whose traceparent stores the ids, and 1%).
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { forwardRequestHeaders } from '../dist/proxy/headers.js';
import { HexPool, TraceStart, traceparentOf } from '../dist/tracing/context.js';
import { OtlpWriter } from '../dist/tracing/otlp.js';
import { wakeSpans } from '../dist/tracing/spans.js';
import {
  cannon,
  freePort,
  loadAverage,
  mainThreadCpuSeconds,
  median,
  metricSum,
  ROOT,
  settle,
  startBenchGateway,
  startOrigin,
  startProcess,
  sumOfMetric,
  table,
  treeCpuSeconds,
  withTraceparent,
} from './lib.mjs';

const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** BENCH_BLOCKS: how many times every gateway is started afresh, ROUNDS rounds each. */
const BLOCKS = Number(process.env.BENCH_BLOCKS ?? 3);
/** BENCH_AA=1: four gateways alike (tracing off), for what the bench itself puts between its rows. */
const AA = process.env.BENCH_AA === '1';
/** BENCH_IDS=1: what storing the ids costs against a header of the same length that stores nothing. */
const IDS = process.env.BENCH_IDS === '1';
const RATE = Number(process.env.BENCH_RATE ?? 2000);
/**
 * BENCH_LOAD_RATE: each gateway loaded at this many requests a second (autocannon's
 * overallRate) instead of as fast as it answers, so all serve alike and their
 * per-second work (the storage engine's, timers) weighs alike on each request.
 */
const LOAD_RATE = Number(process.env.BENCH_LOAD_RATE ?? 1500) || null;
/** Every gateway loaded at once in a round (BENCH_TOGETHER=0: one at a time, the order turning). */
const TOGETHER = process.env.BENCH_TOGETHER !== '0';
const CONNECTIONS = 50;
const tmp = mkdtempSync(join(tmpdir(), 'wakegate-bench-tracing-'));
const procs = [];

const require = createRequire(import.meta.url);
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');
const ExportRequest = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const { ProtobufTraceSerializer } = require('@opentelemetry/otlp-transformer');

/** An OTLP/HTTP receiver in this process: decodes each export and counts its spans. */
async function startReceiver() {
  const counted = { spans: 0, requests: 0 };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const r = ExportRequest.decode(Buffer.concat(chunks));
      for (const rs of r.resourceSpans) for (const ss of rs.scopeSpans) counted.spans += ss.spans.length;
      counted.requests++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      res.end();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/v1/traces`, counted, close: () => server.close() };
}

/** CPU time used by this process so far, ns. */
function cpuNs() {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
}

/**
 * ns per call of `a` and of `b`, and what `b` adds: measured in 31 alternating runs of
 * `n` calls each, the median of each and of the pairs' differences, so a machine
 * whose speed drifts (other work on its cores) moves both alike.
 */
function nsPair(a, b, n = 100_000) {
  const ra = [];
  const rb = [];
  const diff = [];
  // CPU time of this process, not the clock's: time spent waiting for a core (other work on the machine) is not counted.
  const time = (fn) => {
    const t0 = cpuNs();
    for (let i = 0; i < n; i++) fn(i);
    return (cpuNs() - t0) / n;
  };
  for (let i = 0; i < 5; i++) time(a) + time(b); // warm both up (optimized before timing)
  for (let r = 0; r < 31; r++) {
    const x = time(a);
    const y = time(b);
    ra.push(x);
    rb.push(y);
    diff.push(y - x);
  }
  return [median(ra), median(rb), median(diff)];
}

/** The request thread's share: TraceStart.begin, traceparentOf, and the header rules with and without it. */
function microBench() {
  const raw = ['Host', 'example', 'User-Agent', 'bench/1', 'Accept', '*/*', 'Authorization', 'Bearer x'];
  const rawTp = [...raw, 'traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'];
  const fresh = () => ({ traceId: '', spanId: '', parentSpanId: '', traceFlags: '00', traceSampled: false });
  let sink = 0;
  const rows = [];
  for (const [name, enabled, ratio, header] of [
    ['tracing off, no traceparent', false, 0, undefined],
    ['tracing off, traceparent came', false, 0, rawTp[9]],
    ['1%, no traceparent (new trace)', true, 0.01, undefined],
    ['100%, no traceparent (new trace)', true, 1, undefined],
    ['1%, traceparent came', true, 0.01, rawTp[9]],
  ]) {
    const ts = new TraceStart({ enabled, sampleRatio: ratio });
    const r = header === undefined ? raw : rawTp;
    // The same work as the proxy's: an exchange's fields, the header, the header rules with the trace option.
    const [base, traced, added] = nsPair(
      () => {
        const x = fresh();
        const o = {
          dropAuthorization: true,
          clientIp: '127.0.0.1',
          clientTrusted: false,
          proto: 'http',
          originHost: 'origin',
          identity: null,
        };
        sink += forwardRequestHeaders(r, o).length + x.traceId.length;
      },
      () => {
        const x = fresh();
        ts.begin(x, header);
        const o = {
          dropAuthorization: true,
          clientIp: '127.0.0.1',
          clientTrusted: false,
          proto: 'http',
          originHost: 'origin',
          identity: null,
          traceparent: traceparentOf(x),
          keepTracestate: x.parentSpanId !== '',
        };
        sink += forwardRequestHeaders(r, o).length;
      },
    );
    rows.push([name, base.toFixed(0), traced.toFixed(0), added.toFixed(0)]);
  }
  if (sink === 42) console.log('');
  return rows;
}

/**
 * The same spans as the SDK's span objects, for the generic serializer (what the
 * gateway ran before its own encoder; test/helpers/otlp-oracle.ts is the tests' copy).
 */
class SdkSpans {
  spans = [];
  current = {};
  resource = { attributes: { 'service.name': 'wakegate' } };
  scope = { name: 'wakegate', version: 'bench' };
  hr(ms) {
    const s = Math.floor(ms / 1000);
    return [s, Math.round((ms - s * 1000) * 1e6)];
  }
  get last() {
    return this.spans[this.spans.length - 1];
  }
  begin(s) {
    const ctx = { traceId: s.traceId, spanId: s.spanId, traceFlags: 1 };
    this.current = {};
    this.spans.push({
      name: s.name,
      kind: s.kind - 1,
      spanContext: () => ctx,
      parentSpanContext:
        s.parentSpanId === ''
          ? undefined
          : { traceId: s.traceId, spanId: s.parentSpanId, traceFlags: 1, isRemote: s.remoteParent },
      startTime: this.hr(s.startMs),
      endTime: this.hr(s.endMs),
      duration: this.hr(s.endMs - s.startMs),
      ended: true,
      attributes: this.current,
      droppedAttributesCount: 0,
      events: [],
      droppedEventsCount: 0,
      links: [],
      droppedLinksCount: 0,
      status: { code: 0 },
      resource: this.resource,
      instrumentationScope: this.scope,
    });
  }
  str(k, v) {
    this.current[k.name] = v;
  }
  num(k, v) {
    this.current[k.name] = v;
  }
  bool(k, v) {
    this.current[k.name] = v;
  }
  attrs(a) {
    for (const [k, v] of a.list) this.current[k.name] = v;
  }
  event(name, timeMs) {
    this.current = {};
    this.last.events.push({ name, time: this.hr(timeMs), attributes: this.current });
  }
  endEvent() {
    this.current = this.last.attributes;
  }
  link(traceId, spanId) {
    this.last.links.push({ context: { traceId, spanId, traceFlags: 1 }, attributes: {} });
  }
  end(error) {
    this.last.status = error === '' ? { code: 0 } : { code: 2, message: error };
  }
}

/**
 * The control thread's share per exported request (a SERVER and a CLIENT span, 512 a
 * batch): written by our encoder (tracing/otlp.ts), and for comparison, in the same
 * run, as the SDK's span objects serialized by ProtobufTraceSerializer. CPU time of
 * this thread, alternating runs, medians of 25.
 */
function exportCost() {
  const build = wakeSpans(
    { routes: [{ name: 'bench', rate_limit: 'default', origins: { production: 'http://o:1' } }] },
    new HexPool(),
  );
  const input = (i) => ({
    kind: 'wake',
    traceId: 'ab'.repeat(16),
    spanId: 'cd'.repeat(8),
    parentSpanId: '',
    wakeId: `wk_${i}`,
    method: 'GET',
    route: 'bench',
    path: '/bench/items',
    status: 200,
    clientIp: '127.0.0.1',
    userAgent: 'autocannon',
    protocol: 'http/1.1',
    scheme: 'http',
    upstreamPath: '/bench/items',
    keyId: 'key_1',
    environment: 'production',
    start: 1.7e12 + i,
    durationMs: 1.5,
    upstreamAtMs: 0.1,
    errorType: '',
  });
  const items = Array.from({ length: 512 }, (_, i) => input(i));
  const writer = new OtlpWriter({ serviceName: 'wakegate', scopeName: 'wakegate', scopeVersion: 'bench' });
  const b = [];
  const z = [];
  const ours = [];
  let bytes = 0;
  let oursBytes = 0;
  for (let r = 0; r < 25; r++) {
    const t0 = cpuNs();
    const sdk = new SdkSpans();
    for (const it of items) build(it, sdk);
    const t1 = cpuNs();
    bytes = ProtobufTraceSerializer.serializeRequest(sdk.spans).length;
    const t2 = cpuNs();
    writer.start();
    for (const it of items) build(it, writer);
    oursBytes = writer.finish().length;
    const t3 = cpuNs();
    b.push((t1 - t0) / 1000 / items.length);
    z.push((t2 - t1) / 1000 / items.length);
    ours.push((t3 - t2) / 1000 / items.length);
  }
  return {
    build: median(b),
    serialize: median(z),
    bytes: bytes / items.length,
    ours: median(ours),
    oursBytes: oursBytes / items.length,
  };
}

/**
 * The control thread's whole cost per exported request at 100%, from the recorder's
 * hook on: the span input picked, queued, written as OTLP (batches of 512 spans) and
 * POSTed to a receiver in another process (it drains and answers 200), with the
 * default tracing config. Main-thread CPU (/proc, not this process's other threads),
 * 200k finished requests a run, against the same loop without the hook, alternating,
 * medians of the differences.
 */
async function exportPathCost() {
  const { spawn } = await import('node:child_process');
  const { createTracing } = await import('../dist/tracing/index.js');
  const { tracingDefaults } = await import('../dist/config/tracing.js');
  const { createMetrics } = await import('../dist/metrics/index.js');
  const { silentLogger } = await import('../dist/log.js');
  const child = spawn(
    process.execPath,
    [
      '-e',
      "const s=require('http').createServer((q,r)=>{q.resume();q.on('end',()=>{r.writeHead(200);r.end()})});s.listen(0,'127.0.0.1',()=>console.log(s.address().port))",
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = await new Promise((r) => child.stdout.once('data', (d) => r(Number(String(d).trim()))));
  const metrics = createMetrics({ process: false });
  const cfg = {
    tracing: { ...tracingDefaults, otlp_url: `http://127.0.0.1:${port}/v1/traces`, sample_ratio: 1 },
    routes: [
      { name: 'bench', rate_limit: 'default', origins: { production: 'http://o:1' }, latency_objective_ms: 1000 },
    ],
  };
  const tracing = createTracing({ cfg, log: silentLogger, metrics });
  const pool = new HexPool();
  const x = (i) => ({
    traceSampled: true,
    traceId: pool.take(32),
    spanId: pool.take(16),
    parentSpanId: '',
    protocol: 'http/1.1',
    secure: false,
    upstreamPath: '/bench/items',
    start: Date.now(),
    t0: i,
    tUp: i + 0.1,
    errorType: '',
  });
  const w = (i) => ({
    id: `wk_${i}`,
    status: 200,
    route: 'bench',
    latency_ms: 1,
    method: 'GET',
    path: '/bench/items',
    client_ip: '127.0.0.1',
    user_agent: 'autocannon',
    key_id: 'key_1',
    environment: 'production',
  });
  const N = 200_000;
  // Requests finish 256 at a time, a timer turn between (the exports run on their own turns).
  const run = async (hook) => {
    const t0 = mainThreadCpuSeconds(process.pid);
    for (let i = 0; i < N; i += 256) {
      for (let k = i; k < i + 256; k++) {
        const a = x(k);
        const b = w(k);
        if (hook !== null) hook(a, b, k + 1.5);
      }
      // Until the batch has left (none dropped: the queue holds four).
      do await new Promise((r) => setTimeout(r, 1));
      while (tracing.exporter.queuedSpans > 0);
    }
    await new Promise((r) => setTimeout(r, 20));
    return ((mainThreadCpuSeconds(process.pid) - t0) * 1e6) / N;
  };
  const diffs = [];
  await run(tracing.hook);
  for (let r = 0; r < 5; r++) {
    const base = await run(null);
    diffs.push((await run(tracing.hook)) - base);
  }
  const text = await metrics.registry.metrics();
  await tracing.close();
  child.kill();
  return {
    us: median(diffs),
    runs: diffs,
    exported: sumOfMetric(text, 'wakegate_trace_spans_exported_total'),
    dropped: sumOfMetric(text, 'wakegate_trace_spans_dropped_total'),
  };
}

/** One block's rounds: each target's CPU per request (all threads, and the main thread's) and req/s. */
async function measureBlock(targets, block) {
  for (let round = 1; round <= ROUNDS; round++) {
    await settle(targets.map((x) => x.pid));
    process.stderr.write(`block ${block}: round ${round}\n`);
    const load = (t) =>
      cannon({
        url: `${t.url}/bench/items?id=${round}`,
        connections: CONNECTIONS,
        duration: DURATION,
        headers: t.headers,
        ...(LOAD_RATE === null ? {} : { overallRate: LOAD_RATE }),
        ...(t.traced
          ? { requests: [{ setupRequest: withTraceparent('00', t.traced === true ? 'traceparent' : t.traced) }] }
          : {}),
      });
    const note = (t, r, c0, m0) => {
      const n = Math.max(1, r.requests.total);
      t.cpu.push(((treeCpuSeconds(t.pid) - c0) * 1e6) / n);
      t.main.push(((mainThreadCpuSeconds(t.pid) - m0) * 1e6) / n);
      t.rps.push(r.requests.average);
      t.block.push(block);
    };
    if (TOGETHER) {
      // All at once, under the same load from this process: whatever else the machine
      // runs slows them alike. On a busy host this process cannot load four gateways,
      // and a request's CPU is then mostly the storage engine's idle work spread over few.
      const c0 = targets.map((t) => treeCpuSeconds(t.pid));
      const m0 = targets.map((t) => mainThreadCpuSeconds(t.pid));
      const rs = await Promise.all(targets.map(load));
      for (const [i, t] of targets.entries()) note(t, rs[i], c0[i], m0[i]);
    } else {
      // One at a time, each with the whole load generator, in an order that turns each
      // round (so none is always measured first or last), minutes apart at most.
      for (let k = 0; k < targets.length; k++) {
        const t = targets[(k + round - 1) % targets.length];
        await settle([t.pid]);
        const c0 = treeCpuSeconds(t.pid);
        const m0 = mainThreadCpuSeconds(t.pid);
        note(t, await load(t), c0, m0);
      }
    }
  }
}

async function main() {
  const origin = await startOrigin();
  procs.push(origin);
  const receiver = await startReceiver();
  // `off, ids stored`: tracing off, but every request brings a traceparent of a new trace, so
  // its wake stores trace_id and span_id: what storing them costs, apart from tracing's own work.
  const rowsOf = IDS
    ? [
        ['off', '', false],
        ['off, x-bench-trace', '', 'x-bench-trace'],
        ['off, ids stored', '', true],
        ['1%', `tracing: { otlp_url: "${receiver.url}", sample_ratio: 0.01 }\n`, false],
      ]
    : AA
      ? [
          ['off', '', false],
          ['off (b)', '', false],
          ['off (c)', '', false],
          ['off (d)', '', false],
        ]
      : [
          ['off', '', false],
          ['off, ids stored', '', true],
          ['1%', `tracing: { otlp_url: "${receiver.url}", sample_ratio: 0.01 }\n`, false],
          ['100%', `tracing: { otlp_url: "${receiver.url}", sample_ratio: 1 }\n`, false],
        ];
  const targets = rowsOf.map(([name, yaml, traced]) => ({ name, yaml, traced, cpu: [], main: [], rps: [], block: [] }));
  // Each block starts every gateway afresh: a process's own luck (when its storage engine
  // merges, how its heap and code settled) stays with it for its life, and in one set of
  // processes it moved a row by as much as 9% with no tracing in it at all. New processes
  // each block turn that into noise the medians take out.
  for (let block = 1; block <= BLOCKS; block++) {
    const live = [];
    // Started in a turning order, so none is always the newest when loading begins.
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(k + block - 1) % targets.length];
      const dir = join(tmp, `b${block}-${t.name.replace(/[^a-z0-9]+/g, '-')}`);
      const g = await startBenchGateway(dir, origin.url, 'required', t.yaml, {}, 1);
      procs.push(g.gateway);
      live.push(g.gateway);
      Object.assign(t, g, { pid: g.gateway.proc.pid });
    }
    // Warmed all at once (fresh processes: their code optimized, their stores' first parts written).
    process.stderr.write(`block ${block}: warm-up\n`);
    await Promise.all(
      targets.map((t) =>
        cannon({
          url: `${t.url}/warm`,
          connections: 20,
          duration: WARMUP,
          overallRate: LOAD_RATE ?? RATE,
          headers: t.headers,
        }),
      ),
    );
    await measureBlock(targets, block);
    // The last batches leave (flush_interval_ms is 1 s by default) before the counts are read.
    await new Promise((r) => setTimeout(r, 1500));
    for (const t of targets) {
      t.exported = (t.exported ?? 0) + (await metricSum(t.opsUrl, 'wakegate_trace_spans_exported_total'));
      t.dropped = (t.dropped ?? 0) + (await metricSum(t.opsUrl, 'wakegate_trace_spans_dropped_total'));
    }
    for (const g of live) {
      await g.stop();
      procs.splice(procs.indexOf(g), 1);
    }
  }
  const rows = [];
  const off = targets[0];
  for (const t of targets) {
    const cpu = median(t.cpu);
    // Each block's own median against off, for how far one set of processes lands from the next.
    const blocks = [];
    for (let b = 1; b <= BLOCKS; b++) {
      const r = t.cpu
        .filter((_, i) => t.block[i] === b)
        .map((c, i) => c / off.cpu.filter((_, j) => off.block[j] === b)[i]);
      blocks.push(`${((median(r) - 1) * 100).toFixed(1)}%`);
    }
    // Against off in the same round (measured minutes apart at most): a machine whose load drifts moves both.
    const ratio = median(t.cpu.map((c, i) => c / targets[0].cpu[i]));
    const mainRatio = median(t.main.map((c, i) => c / targets[0].main[i]));
    // The same in microseconds, to set against a request's cost at another rate.
    const added = median(t.cpu.map((c, i) => c - targets[0].cpu[i]));
    rows.push([
      t.name,
      cpu.toFixed(1),
      t.name === 'off' ? '—' : `${((ratio - 1) * 100).toFixed(1)}%`,
      t.name === 'off' ? '—' : added.toFixed(1),
      t.cpu.map((c) => c.toFixed(1)).join(' / '),
      median(t.main).toFixed(1),
      t.name === 'off' ? '—' : `${((mainRatio - 1) * 100).toFixed(1)}%`,
      Math.round(median(t.rps)).toLocaleString('en-US'),
      t.name === 'off' ? '—' : blocks.join(' / '),
      t.name.startsWith('off') ? '—' : String(t.exported),
      t.name.startsWith('off') ? '—' : String(t.dropped),
    ]);
  }
  console.log(
    `\nbench:tracing — Node ${process.versions.node}, ${DURATION} s per round at ${CONNECTIONS} connections each${LOAD_RATE === null ? '' : ` at ${LOAD_RATE} req/s`} (${TOGETHER ? 'all at once' : 'one at a time, the order turning'}), ${BLOCKS} blocks of fresh gateways x ${ROUNDS} rounds, keyed route (everything on), threads: 1; load average ${loadAverage()}\n`,
  );
  console.log(
    table(
      [
        'tracing',
        'CPU us / request (median)',
        'vs off (median of rounds)',
        'added us / request',
        'rounds',
        'main thread us / request',
        'main vs off',
        'req/s',
        'vs off, each block',
        'spans exported',
        'spans dropped',
      ],
      rows,
    ),
  );
  console.log(`\nreceiver: ${receiver.counted.spans} spans decoded in ${receiver.counted.requests} export requests\n`);
  console.log(
    'request thread, CPU ns per request (31 alternating runs of 100k, medians): header rules alone, with trace context, added',
  );
  console.log(`${table(['case', 'without', 'with', 'added ns'], microBench())}\n`);
  printExportCost();
  await printExportPathCost();
  receiver.close();
}

/**
 * `--paired`: sampling's own cost in one process, flat out. One gateway traces with
 * sample_ratio 0, and is loaded in turn with requests whose traceparent says "not
 * sampled" (00: ids kept in the wake, no span) and "sampled" (01: the gateway follows
 * the caller, every request's spans exported), one window after the other: the same
 * heap, connections, store and data, so their difference is what exporting costs, with
 * no process-to-process variance in it. A gateway with tracing off is loaded in the same
 * rounds with the same header under another name, for what a request costs with
 * nothing of tracing. Each window alone and as fast as the gateway answers, the order
 * turning each round.
 */
async function paired() {
  const origin = await startOrigin();
  procs.push(origin);
  // A receiver in a process of its own that only drains: decoding in this process (as the
  // default mode's does) slowed its load generator in the sampled windows alone, and a
  // gateway served fewer requests a second costs more a request (its per-second work and
  // fewer requests a turn), which showed as tracing's cost.
  const drainPort = await freePort();
  const drain = await startProcess(
    'otlp drain',
    process.execPath,
    [join(ROOT, 'bench/servers/otlp-drain.mjs')],
    { PORT: String(drainPort) },
    `http://127.0.0.1:${drainPort}/`,
  );
  procs.push(drain);
  const receiver = { url: `http://127.0.0.1:${drainPort}/v1/traces` };
  const off = await startBenchGateway(join(tmp, 'off'), origin.url, 'required', '', {}, 1);
  procs.push(off.gateway);
  const on = await startBenchGateway(
    join(tmp, 'on'),
    origin.url,
    'required',
    `tracing: { otlp_url: "${receiver.url}", sample_ratio: 0 }\n`,
    {},
    1,
  );
  procs.push(on.gateway);
  const windows = [
    { name: 'off (x-bench-trace instead)', g: off, setup: withTraceparent('01', 'x-bench-trace') },
    { name: 'on, not sampled (00)', g: on, setup: withTraceparent('00') },
    { name: 'on, sampled (01): 100%', g: on, setup: withTraceparent('01') },
    // Tracing off, the same header as the first window but a traceparent: the wake keeps its ids.
    { name: 'off, ids stored (00)', g: off, setup: withTraceparent('00') },
  ].map((w) => ({ ...w, pid: w.g.gateway.proc.pid, cpu: [], main: [], rps: [] }));
  const load = (w, duration, path) =>
    cannon({
      url: `${w.g.url}${path}`,
      connections: CONNECTIONS,
      duration,
      headers: w.g.headers,
      ...(w.setup === null ? {} : { requests: [{ setupRequest: w.setup }] }),
    });
  for (const w of windows) {
    process.stderr.write(`warm-up ${w.name}\n`);
    await load(w, WARMUP, '/warm');
  }
  for (let round = 1; round <= ROUNDS; round++) {
    process.stderr.write(`round ${round}\n`);
    for (let k = 0; k < windows.length; k++) {
      const w = windows[(k + round - 1) % windows.length];
      await settle([off.gateway.proc.pid, on.gateway.proc.pid]);
      const c0 = treeCpuSeconds(w.pid);
      const m0 = mainThreadCpuSeconds(w.pid);
      const r = await load(w, DURATION, `/bench/items?id=${round}`);
      const n = Math.max(1, r.requests.total);
      w.cpu.push(((treeCpuSeconds(w.pid) - c0) * 1e6) / n);
      w.main.push(((mainThreadCpuSeconds(w.pid) - m0) * 1e6) / n);
      w.rps.push(r.requests.average);
    }
  }
  const [a, b, c, d] = windows;
  const pairs = (x, y, f) => median(x.map((v, i) => f(v, y[i])));
  const rows = windows.map((w) => [
    w.name,
    median(w.cpu).toFixed(1),
    w === a ? '—' : `${((pairs(w.cpu, a.cpu, (p, q) => p / q) - 1) * 100).toFixed(1)}%`,
    w === a ? '—' : pairs(w.cpu, a.cpu, (p, q) => p - q).toFixed(1),
    w.cpu.map((v) => v.toFixed(1)).join(' / '),
    median(w.main).toFixed(1),
    Math.round(median(w.rps)).toLocaleString('en-US'),
  ]);
  console.log(
    `\nbench:tracing --paired — Node ${process.versions.node}, ${ROUNDS} rounds of ${DURATION} s windows at ${CONNECTIONS} connections, each alone and flat out, threads: 1; load average ${loadAverage()}\n`,
  );
  console.log(
    table(
      [
        'window',
        'CPU us / request (median)',
        'vs off',
        'added us / request',
        'rounds',
        'main thread us / request',
        'req/s',
      ],
      rows,
    ),
  );
  const own = pairs(c.cpu, b.cpu, (p, q) => p - q);
  const ownMain = pairs(c.main, b.main, (p, q) => p - q);
  console.log(
    `\nsampling's own cost, same process (sampled minus not sampled, paired by round): ${own.toFixed(1)} us a request (main thread ${ownMain.toFixed(1)} us), ${((own / median(a.cpu)) * 100).toFixed(1)}% of a request with tracing off; rounds ${c.cpu.map((v, i) => (v - b.cpu[i]).toFixed(1)).join(' / ')}`,
  );
  const ids = pairs(d.cpu, a.cpu, (p, q) => p - q);
  const idsMain = pairs(d.main, a.main, (p, q) => p - q);
  console.log(
    `storing the ids, same process (tracing off: traceparent minus x-bench-trace, paired by round): ${ids.toFixed(1)} us a request (main thread ${idsMain.toFixed(1)} us), ${((ids / median(a.cpu)) * 100).toFixed(1)}%; rounds ${d.cpu.map((v, i) => (v - a.cpu[i]).toFixed(1)).join(' / ')}`,
  );
  const drained = await (await fetch(`http://127.0.0.1:${drainPort}/`)).json();
  const exported = await metricSum(on.opsUrl, 'wakegate_trace_spans_exported_total');
  const dropped = await metricSum(on.opsUrl, 'wakegate_trace_spans_dropped_total');
  console.log(
    `receiver (another process, drains): ${drained.requests} export requests, ${(drained.bytes / 1e6).toFixed(1)} MB; the gateway counted ${exported} spans exported, ${dropped} dropped`,
  );
}

function printExportCost() {
  const c = exportCost();
  console.log(
    `control thread, per exported request (SERVER + CLIENT span, 512 a batch, median of 25): written by tracing/otlp.ts ${c.ours.toFixed(2)} us, ${Math.round(c.oursBytes)} bytes; the generic way: SDK span objects ${c.build.toFixed(1)} us + ProtobufTraceSerializer ${c.serialize.toFixed(1)} us, ${Math.round(c.bytes)} bytes`,
  );
}

async function printExportPathCost() {
  const p = await exportPathCost();
  console.log(
    `control thread, whole export path per exported request at 100% (hook, queue, OTLP, POST; main-thread CPU, 5 x 200k against the loop without it, median): ${p.us.toFixed(2)} us (runs ${p.runs.map((r) => r.toFixed(2)).join(' / ')}); ${p.exported} spans exported, ${p.dropped} dropped`,
  );
}

try {
  if (process.argv.includes('--micro')) {
    console.log(`load average ${loadAverage()}`);
    console.log(table(['case', 'without', 'with', 'added ns'], microBench()));
    printExportCost();
    await printExportPathCost();
  } else if (process.argv.includes('--paired')) await paired();
  else await main();
} finally {
  for (const p of procs.reverse()) await p.stop();
  rmSync(tmp, { recursive: true, force: true });
}
