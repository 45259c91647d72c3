#!/usr/bin/env node
// bench:tracing — what tracing costs: the gateway process's CPU per request
// (utime + stime of all its threads, /proc/<pid>/stat, before and after a load of fixed
// duration at 50 connections)
// with tracing off, at 1% and at 100% head sampling, side by side in one run
// (all loaded at once in each round, so a busy machine slows them alike; medians of three), each exporting to a local OTLP receiver
// that decodes every request with the OpenTelemetry project's generated definitions
// and counts the spans; then the request thread's own added cost in ns (a micro-bench
// of the id minting and the traceparent header). Targets: <= 3% more CPU at 1%,
// <= 10% at 100%, <= 0.5 us on the request thread.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { forwardRequestHeaders } from '../dist/proxy/headers.js';
import { HexPool, TraceStart, traceparentOf } from '../dist/tracing/context.js';
import { OtlpWriter } from '../dist/tracing/otlp.js';
import { wakeSpans } from '../dist/tracing/spans.js';
import { cannon, median, settle, startBenchGateway, startOrigin, table, treeCpuSeconds } from './lib.mjs';

const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const RATE = Number(process.env.BENCH_RATE ?? 2000);
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
  attrs = {};
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
    this.attrs = {};
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
      attributes: this.attrs,
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
    this.attrs[k.name] = v;
  }
  num(k, v) {
    this.attrs[k.name] = v;
  }
  bool(k, v) {
    this.attrs[k.name] = v;
  }
  event(name, timeMs) {
    this.attrs = {};
    this.last.events.push({ name, time: this.hr(timeMs), attributes: this.attrs });
  }
  endEvent() {
    this.attrs = this.last.attributes;
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

/** autocannon's setupRequest: a traceparent of a new random trace on each request. */
function withTraceparent(req) {
  const id = randomBytes(24).toString('hex');
  req.headers = { ...req.headers, traceparent: `00-${id.slice(0, 32)}-${id.slice(32)}-00` };
  return req;
}

async function main() {
  const origin = await startOrigin();
  procs.push(origin);
  const receiver = await startReceiver();
  const targets = [];
  // `off, ids stored`: tracing off, but every request brings a traceparent of a new trace, so
  // its wake stores trace_id and span_id: what storing them costs, apart from tracing's own work.
  for (const [name, yaml, traced] of [
    ['off', '', false],
    ['off, ids stored', '', true],
    ['1%', `tracing: { otlp_url: "${receiver.url}", sample_ratio: 0.01 }\n`, false],
    ['100%', `tracing: { otlp_url: "${receiver.url}", sample_ratio: 1 }\n`, false],
  ]) {
    const dir = join(tmp, name.replace(/[^a-z0-9]+/g, '-'));
    const g = await startBenchGateway(dir, origin.url, 'required', yaml, {}, 1);
    procs.push(g.gateway);
    targets.push({ name, traced, ...g, pid: g.gateway.proc.pid, cpu: [], rps: [], served: 0 });
  }
  for (const t of targets) {
    process.stderr.write(`warm-up ${t.name}\n`);
    await cannon({ url: `${t.url}/warm`, connections: 20, duration: WARMUP, overallRate: RATE, headers: t.headers });
  }
  for (let round = 1; round <= ROUNDS; round++) {
    await settle(targets.map((x) => x.pid));
    process.stderr.write(`round ${round}\n`);
    // All at once, under the same load from this process: whatever else the
    // machine runs slows them alike, so their CPU per request compares within a round.
    const c0 = targets.map((t) => treeCpuSeconds(t.pid));
    const rs = await Promise.all(
      targets.map((t) =>
        cannon({
          url: `${t.url}/bench/items?id=${round}`,
          connections: CONNECTIONS,
          duration: DURATION,
          headers: t.headers,
          ...(t.traced ? { requests: [{ setupRequest: withTraceparent }] } : {}),
        }),
      ),
    );
    targets.forEach((t, i) => {
      const r = rs[i];
      t.cpu.push(((treeCpuSeconds(t.pid) - c0[i]) * 1e6) / Math.max(1, r.requests.total));
      t.rps.push(r.requests.average);
      t.served += r['2xx'];
    });
  }
  await new Promise((r) => setTimeout(r, 1500));
  const metric = async (t, name) => {
    const text = await (await fetch(`${t.opsUrl}/metrics`)).text();
    return [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)`, 'gm'))].reduce(
      (a, m) => a + Number(m[1]),
      0,
    );
  };
  const rows = [];
  for (const t of targets) {
    const cpu = median(t.cpu);
    // Against off in the same round (measured minutes apart at most): a machine whose load drifts moves both.
    const ratio = median(t.cpu.map((c, i) => c / targets[0].cpu[i]));
    rows.push([
      t.name,
      cpu.toFixed(1),
      t.name === 'off' ? '—' : `${((ratio - 1) * 100).toFixed(1)}%`,
      t.cpu.map((c) => c.toFixed(1)).join(' / '),
      Math.round(median(t.rps)).toLocaleString('en-US'),
      t.name.startsWith('off') ? '—' : String(await metric(t, 'wakegate_trace_spans_exported_total')),
      t.name.startsWith('off') ? '—' : String(await metric(t, 'wakegate_trace_spans_dropped_total')),
    ]);
  }
  console.log(
    `\nbench:tracing — Node ${process.versions.node}, ${DURATION} s per round at ${CONNECTIONS} connections each (all at once), ${ROUNDS} rounds, keyed route (everything on), threads: 1\n`,
  );
  console.log(
    table(
      [
        'tracing',
        'CPU us / request (median)',
        'vs off (median of rounds)',
        'rounds',
        'req/s',
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
  receiver.close();
}

function printExportCost() {
  const c = exportCost();
  console.log(
    `control thread, per exported request (SERVER + CLIENT span, 512 a batch, median of 25): written by tracing/otlp.ts ${c.ours.toFixed(2)} us, ${Math.round(c.oursBytes)} bytes; the generic way: SDK span objects ${c.build.toFixed(1)} us + ProtobufTraceSerializer ${c.serialize.toFixed(1)} us, ${Math.round(c.bytes)} bytes`,
  );
}

try {
  if (process.argv.includes('--micro')) {
    console.log(table(['case', 'without', 'with', 'added ns'], microBench()));
    printExportCost();
  } else await main();
} finally {
  for (const p of procs.reverse()) await p.stop();
  rmSync(tmp, { recursive: true, force: true });
}
