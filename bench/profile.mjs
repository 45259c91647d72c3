// Where a proxy's main-thread CPU goes, per request: V8's sampling profiler over the
// same load against the bare undici proxy and wakegate (full, detail on and off), its
// time split two ways. "By code" is each sample's own frame: wakegate's modules by
// file, node:http, Node's sockets and streams, undici, GC. "By caller" charges a
// sample to the innermost frame of the proxy's own code on its stack (a wakegate
// module, or the bare proxy's script), so Node's and undici's work done for a call
// the proxy makes counts as that call's; what runs under no such frame (reading
// sockets, parsing requests) keeps its code's name.
//   BENCH_ROUNDS (2), BENCH_SECONDS (8), BODY_BYTES (1000), BENCH_CONNECTIONS (50),
//   BENCH_TOP (25: functions listed by self time for the full gateway), BENCH_KEEP_PROFILES
//   (a directory to keep the profiles in, for Chrome's DevTools or speedscope),
//   BENCH_PROFILE=tax (the full gateway against itself with auth: none, no key: what
//   keys, buckets and their redaction cost, instead of detail off),
//   BENCH_PROFILE=tracing (instead of the three above: one gateway tracing with sample_ratio
//   0, loaded in turn with requests whose traceparent says not sampled and sampled, so the
//   second's spans are all exported, to a receiver in a process of its own that drains them).
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cannon,
  cpuSeconds,
  DETAIL_OFF_YAML,
  freePort,
  ROOT,
  startBenchGateway,
  startOrigin,
  startProcess,
  table,
  withTraceparent,
} from './lib.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const TOP = Number(process.env.BENCH_TOP ?? 25);
const tmp = mkdtempSync(join(tmpdir(), 'wakegate-profile-'));
const preload = (name) => ({
  NODE_OPTIONS: `--import=${join(ROOT, 'bench/servers/profiler.mjs')}`,
  PROFILE_FILE: join(tmp, `${name}.cpuprofile`),
});

/** Main thread (the process's own task) CPU seconds, user and system. */
function mainThreadCpu(pid) {
  const f = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return { user: Number(rest[11]) / 100, sys: Number(rest[12]) / 100 };
}
/** The category of a frame's own code, or null for a native function (charged to its caller). */
function codeOf(url, fn) {
  if (!url) {
    if (fn === '(garbage collector)') return 'GC';
    if (fn === '(program)') return 'native, outside JavaScript';
    if (fn === '(idle)' || fn === '(root)') return fn;
    return null;
  }
  const dist = url.indexOf('/dist/');
  if (dist !== -1) return `wakegate ${url.slice(dist + 6).replace(/\.js$/, '')}`;
  if (url.includes('/bench/servers/')) return 'bare proxy script';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1];
  if (url.startsWith('node:')) {
    const n = url.slice(5);
    if (/^_http_|^http$|^internal\/http/.test(n)) return 'node:http';
    if (/^net$|^stream|^internal\/(stream_base|streams|net)/.test(n)) return 'node:net and streams';
    if (/^internal\/(process\/task_queues|timers)|^timers/.test(n)) return 'node:timers and ticks';
    return 'node:other';
  }
  return 'other';
}
const OWN = (c) => c !== null && (c.startsWith('wakegate ') || c === 'bare proxy script');

/** Microseconds per category (self and by caller) and per function, of one profile. */
function analyse(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map();
  const caller = new Map();
  const fns = new Map();
  const memo = new Map();
  const classify = (id) => {
    let m = memo.get(id);
    if (m) return m;
    const n = byId.get(id);
    const cf = n.callFrame;
    let code = codeOf(cf.url, cf.functionName);
    let own = null;
    // native frames take their caller's code; "own" is the innermost frame of the proxy's code
    for (let p = id; p !== undefined; p = parent.get(p)) {
      const pc = byId.get(p).callFrame;
      const c = codeOf(pc.url, pc.functionName);
      if (code === null && c !== null) code = c;
      if (OWN(c)) {
        own = c;
        break;
      }
    }
    code ??= 'native';
    m = {
      code,
      caller: own ?? code,
      fn: `${cf.functionName || '(anonymous)'} ${cf.url.replace(/.*\/(dist|node_modules)\//, '')}:${cf.lineNumber + 1}`,
    };
    memo.set(id, m);
    return m;
  };
  const add = (map, k, v) => map.set(k, (map.get(k) ?? 0) + v);
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i + 1] ?? 0; // a sample's time is the gap to the next
    const m = classify(profile.samples[i]);
    if (m.code === '(idle)' || m.code === '(root)') continue;
    add(self, m.code, dt);
    add(caller, m.caller, dt);
    add(fns, m.fn, dt);
  }
  return { self, caller, fns };
}

const origin = await startOrigin(Number(process.env.BODY_BYTES ?? 1000));
const targets = [];
/** BENCH_PROFILE=tracing: the full gateway with tracing off against it exporting every request's spans. */
const TRACING = process.env.BENCH_PROFILE === 'tracing';
const TAX = process.env.BENCH_PROFILE === 'tax';
let collector = null;
if (TRACING) {
  // An OTLP/HTTP receiver in a process of its own that takes each export whole and answers
  // 200: in this one, its work would slow the load generator in the sampled windows alone.
  const drainPort = await freePort();
  collector = await startProcess(
    'otlp drain',
    process.execPath,
    [join(ROOT, 'bench/servers/otlp-drain.mjs')],
    { PORT: String(drainPort) },
    `http://127.0.0.1:${drainPort}/`,
  );
  const otlp = `http://127.0.0.1:${drainPort}/v1/traces`;
  // One gateway (tracing on, sample_ratio 0) profiled under two loads in turn: requests whose
  // traceparent says not sampled (00) and sampled (01, followed): the same process, heap and
  // store, so the difference is exporting's own.
  const g = await startBenchGateway(
    join(tmp, 'traced'),
    origin.url,
    'required',
    `tracing: { otlp_url: "${otlp}", sample_ratio: 0 }\n`,
    preload('traced'),
  );
  for (const [name, flags] of [
    ['not sampled', '00'],
    ['sampled', '01'],
  ]) {
    targets.push({
      name,
      url: g.url,
      headers: g.headers,
      proc: g.gateway,
      file: preload('traced').PROFILE_FILE,
      requests: [{ setupRequest: withTraceparent(flags) }],
    });
  }
} else {
  const port = await freePort();
  const p = await startProcess(
    'bare undici',
    process.execPath,
    [join(ROOT, 'bench/servers/bare-undici.mjs')],
    { ...preload('bare'), PORT: String(port), TARGET: origin.url },
    `http://127.0.0.1:${port}/`,
  );
  targets.push({
    name: 'bare undici',
    url: `http://127.0.0.1:${port}`,
    headers: {},
    proc: p,
    file: preload('bare').PROFILE_FILE,
  });
  for (const [name, yaml, auth] of [
    ['wakegate full', '', 'required'],
    TAX ? ['wakegate pass-through', '', 'none'] : ['wakegate full, detail off', DETAIL_OFF_YAML, 'required'],
  ]) {
    const tag = name.replace(/\W+/g, '-');
    const g = await startBenchGateway(join(tmp, tag), origin.url, auth, yaml, preload(tag));
    targets.push({ name, url: g.url, headers: g.headers, proc: g.gateway, file: preload(tag).PROFILE_FILE });
  }
}
/** The column every other is compared with, and the one compared. */
const [BASE, SUBJECT] = TRACING ? ['not sampled', 'sampled'] : ['bare undici', 'wakegate full'];

const totals = new Map(targets.map((t) => [t.name, { reqs: 0, user: 0, sys: 0, all: 0, a: [] }]));
for (let round = 0; round < ROUNDS; round++) {
  for (const t of targets) {
    const pid = t.proc.proc.pid;
    await cannon({
      url: `${t.url}/warm`,
      connections: CONNECTIONS,
      duration: 2,
      headers: t.headers,
      ...(t.requests ? { requests: t.requests } : {}),
    });
    rmSync(t.file, { force: true });
    process.kill(pid, 'SIGUSR2');
    await new Promise((r) => setTimeout(r, 200));
    const c0 = mainThreadCpu(pid);
    const a0 = cpuSeconds(pid);
    const r = await cannon({
      url: `${t.url}/bench/x`,
      connections: CONNECTIONS,
      duration: SECONDS,
      headers: t.headers,
      ...(t.requests ? { requests: t.requests } : {}),
    });
    const c1 = mainThreadCpu(pid);
    const a1 = cpuSeconds(pid);
    process.kill(pid, 'SIGUSR2');
    for (let i = 0; i < 100 && !existsSync(t.file); i++) await new Promise((res) => setTimeout(res, 50));
    await new Promise((res) => setTimeout(res, 100));
    const tot = totals.get(t.name);
    const n = r.requests.total;
    if (r.non2xx > 0 || r.errors > 0) console.error(`${t.name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    tot.reqs += n;
    tot.user += c1.user - c0.user;
    tot.sys += c1.sys - c0.sys;
    tot.all += a1 - a0;
    tot.a.push(analyse(JSON.parse(readFileSync(t.file, 'utf8'))));
    if (process.env.BENCH_KEEP_PROFILES) {
      mkdirSync(process.env.BENCH_KEEP_PROFILES, { recursive: true });
      copyFileSync(
        t.file,
        join(process.env.BENCH_KEEP_PROFILES, `${t.name.replace(/\W+/g, '-')}-${round + 1}.cpuprofile`),
      );
    }
    console.error(`round ${round + 1} ${t.name}: ${Math.round(n / SECONDS)} req/s`);
  }
}

const perReq = (name, pick) => {
  const tot = totals.get(name);
  const out = new Map();
  for (const a of tot.a) for (const [k, v] of a[pick]) out.set(k, (out.get(k) ?? 0) + v);
  for (const [k, v] of out) out.set(k, v / tot.reqs);
  return out;
};
const names = targets.map((t) => t.name);
const f1 = (v) => (v === undefined ? '-' : v.toFixed(1));
const breakdown = (pick, title) => {
  const maps = names.map((n) => perReq(n, pick));
  const keys = [...new Set(maps.flatMap((m) => [...m.keys()]))];
  const full = maps[1];
  keys.sort((a, b) => (full.get(b) ?? 0) - (maps[0].get(b) ?? 0) - ((full.get(a) ?? 0) - (maps[0].get(a) ?? 0)));
  const rows = keys
    .filter((k) => maps.some((m) => (m.get(k) ?? 0) >= 0.3))
    .map((k) => [k, ...maps.map((m) => f1(m.get(k))), f1((full.get(k) ?? 0) - (maps[0].get(k) ?? 0))]);
  rows.push(['sampled, all', ...maps.map((m) => f1([...m.values()].reduce((x, y) => x + y, 0))), '']);
  console.log(`\n${title} (us per request)\n`);
  console.log(table(['code', ...names, `${SUBJECT} - ${BASE}`], rows));
};

console.log(
  `\nbench:profile: ${ROUNDS} rounds of ${SECONDS} s at ${CONNECTIONS} connections, ${process.env.BODY_BYTES ?? 1000}-byte JSON answers\n`,
);
console.log(
  table(
    ['target', 'req/s', 'CPU us/req, all threads', 'main thread user', 'main thread system'],
    names.map((n) => {
      const t = totals.get(n);
      return [
        n,
        Math.round(t.reqs / (ROUNDS * SECONDS)),
        f1((t.all / t.reqs) * 1e6),
        f1((t.user / t.reqs) * 1e6),
        f1((t.sys / t.reqs) * 1e6),
      ];
    }),
  ),
);
breakdown('self', 'By code: the frame each sample was in');
breakdown('caller', "By caller: charged to the innermost frame of the proxy's own code");
const fns = perReq(SUBJECT, 'fns');
const bareFns = perReq(BASE, 'fns');
const top = [...fns].sort((a, b) => b[1] - a[1]).slice(0, TOP);
console.log(`\n${SUBJECT}: the top ${TOP} functions by self time (us per request)\n`);
console.log(
  table(
    ['function', SUBJECT, BASE],
    top.map(([k, v]) => [k, f1(v), f1(bareFns.get(k))]),
  ),
);

for (const p of new Set(targets.map((t) => t.proc))) await p.stop('SIGTERM');
await origin.stop('SIGKILL');
await collector?.stop();
rmSync(tmp, { recursive: true, force: true });
