// Shared helpers for the benchmarks: ports, child processes, readiness, autocannon, tables.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

export async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** Starts a child process and waits until `url` answers. */
export async function startProcess(name, cmd, args, env, url, timeoutMs = 30_000) {
  const proc = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (c) => {
    out += c;
  });
  proc.stderr.on('data', (c) => {
    out += c;
  });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${name} exited (${proc.exitCode}):\n${out}`);
    const ok = await new Promise((r) => {
      const req = http.get(url, { agent: false }, (res) => {
        res.resume();
        r(res.statusCode !== undefined);
      });
      req.on('error', () => r(false));
      req.setTimeout(500, () => req.destroy());
    });
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`${name} did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    name,
    proc,
    output: () => out,
    stop: (signal = 'SIGTERM') =>
      new Promise((r) => {
        if (proc.exitCode !== null) return r(proc.exitCode);
        proc.once('exit', (code) => r(code));
        proc.kill(signal);
      }),
  };
}

export function cannon(opts) {
  return new Promise((resolve, reject) => {
    autocannon({ ...opts }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : Number.NaN;
};

export function table(headers, rows) {
  const lines = [`| ${headers.join(' | ')} |`, `|${headers.map(() => '---').join('|')}|`];
  for (const r of rows) lines.push(`| ${r.join(' | ')} |`);
  return lines.join('\n');
}

export const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

/**
 * A wakegate process under `dir` in front of `originUrl`, with the benchmark route:
 * `auth: required` is everything on (key, scope check, rate limit at a limit that
 * never refuses, capture, metrics), `auth: none` is pass-through. Returns the process
 * (stop it), its URLs, its data directory and the headers a request needs.
 */
/** BENCH_GATEWAY_NODE_ARGS: Node's own flags for the gateways a bench starts (V8's GC flags, say), space-separated. */
const gatewayNodeArgs = () => (process.env.BENCH_GATEWAY_NODE_ARGS ?? '').split(' ').filter(Boolean);

export async function startBenchGateway(dir, originUrl, auth = 'required', extraYaml = '', env = {}, threads = null) {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const ops = await freePort();
  const cfgFile = join(dir, 'cfg.yaml');
  writeFileSync(
    cfgFile,
    `server: { port: ${port}, host: 127.0.0.1, ops_port: ${ops}${threads === null ? '' : `, threads: ${threads}`} }\nlog: { level: warn }\nrate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\nroutes:\n  - { name: bench, prefix: /, auth: ${auth}, scopes: { read: bench:read, write: bench:write }, origins: { production: ${originUrl} }, latency_objective_ms: 1000 }\n${extraYaml}`,
  );
  const dataDir = join(dir, 'data');
  let headers = {};
  if (auth === 'required') {
    const key = JSON.parse(
      execFileSync(
        process.execPath,
        [
          join(ROOT, 'dist/main.js'),
          'keys',
          'create',
          '--offline',
          '--json',
          '--label',
          'bench',
          '--environment',
          'production',
          '--scopes',
          'bench:read',
          '--config',
          cfgFile,
        ],
        {
          env: { ...process.env, ...env, DATA_DIR: dataDir },
        },
      ).toString(),
    );
    headers = { authorization: `Bearer ${key.secret}` };
  }
  const gateway = await startProcess(
    `wakegate (${auth})`,
    process.execPath,
    [...gatewayNodeArgs(), join(ROOT, 'dist/main.js'), 'serve', '--config', cfgFile],
    { ...env, DATA_DIR: dataDir },
    `http://127.0.0.1:${port}/`,
  );
  return { gateway, url: `http://127.0.0.1:${port}`, opsUrl: `http://127.0.0.1:${ops}`, dataDir, headers };
}

/**
 * Storage in a process of its own behind ClickHouse's HTTP interface
 * (scripts/chdb-http.mjs over chDB), for a gateway run with CLICKHOUSE_URL: what the
 * gateway costs with its storage engine out of its process.
 */
export async function startHttpStorage(dir) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const p = await startProcess(
    'storage over HTTP',
    process.execPath,
    [join(ROOT, 'scripts/chdb-http.mjs')],
    { PORT: String(port), DATA: join(dir, 'chdb-http') },
    `${url}/ping`,
  );
  return { ...p, url };
}

/** The route settings that turn wake detail off (the benches' "detail off" gateways). */
export const DETAIL_OFF_YAML = 'capture: { detail: { headers: false, bodies: false } }\n';

/** The benchmark origin (bench/servers/origin.mjs) answering `bodyBytes` of JSON, with its URL. */
export async function startOrigin(bodyBytes = 1000, name = 'origin') {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const p = await startProcess(
    name,
    process.execPath,
    [join(ROOT, 'bench/servers/origin.mjs')],
    { PORT: String(port), BODY_BYTES: String(bodyBytes) },
    url,
  );
  return { ...p, url };
}

/** The benchmark origin and a wakegate with everything on in front of it, each its own process. */
export async function startFullStack(dir, env = {}) {
  const origin = await startOrigin();
  return { origin, ...(await startBenchGateway(dir, origin.url, 'required', '', env)) };
}

/**
 * The environment that preloads bench/servers/loop-delay.mjs into a Node process,
 * and how to read its event-loop delay: `take(pid)` returns the delay since the last
 * take (p50, p99, max in ms beyond the sampling interval) and starts afresh.
 */
export function loopDelay(file) {
  return {
    env: { NODE_OPTIONS: `--import=${join(ROOT, 'bench/servers/loop-delay.mjs')}`, LOOP_DELAY_FILE: file },
    async take(pid) {
      rmSync(file, { force: true });
      process.kill(pid, 'SIGUSR2');
      for (let i = 0; i < 50 && !existsSync(file); i++) await new Promise((r) => setTimeout(r, 20));
      return JSON.parse(readFileSync(file, 'utf8'));
    },
  };
}

/** CPU seconds (user + system, all threads) a process has used so far. */
export function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(rest[11]) + Number(rest[12])) / 100;
}

/**
 * Each thread of a process: its id, name and CPU ticks so far (user and system, USER_HZ
 * = 100 a second), read from /proc/<pid>/task/<tid>/stat; a thread that ends meanwhile is left out.
 */
export function threadTicks(pid) {
  const out = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let f;
    try {
      f = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    out.push({
      tid,
      name: f.slice(f.indexOf('(') + 1, f.lastIndexOf(')')),
      user: Number(rest[11]),
      sys: Number(rest[12]),
    });
  }
  return out;
}

/** CPU seconds (user + system) a process's main thread has used so far. */
export function mainThreadCpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(rest[11]) + Number(rest[12])) / 100;
}

/**
 * Waits (at most `maxMs`) until the processes use less than `share` of a core each
 * on average over `windowMs` (an idle gateway uses about 4%): a gateway's storage
 * engine goes on merging after its load ends, and would otherwise slow whichever
 * target is measured next.
 */
export async function settle(pids, { share = 0.08, windowMs = 500, maxMs = 15_000 } = {}) {
  const total = () => pids.reduce((a, pid) => a + treeCpuSeconds(pid), 0);
  const end = Date.now() + maxMs;
  while (Date.now() < end) {
    const c0 = total();
    await new Promise((r) => setTimeout(r, windowMs));
    if ((total() - c0) / (windowMs / 1000) < share * pids.length) return;
  }
}

/** CPU seconds of a process and all its descendants (nginx's workers, for one). */
export function treeCpuSeconds(pid) {
  let total = 0;
  try {
    total += cpuSeconds(pid);
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const kids = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (kids) for (const k of kids.split(' ')) total += treeCpuSeconds(Number(k));
    }
  } catch {
    // The process ended.
  }
  return total;
}

/** Sends `signal` to a process and all its descendants (SIGSTOP/SIGCONT: benches hold the targets not measured). */
export function signalTree(pid, signal) {
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const kids = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (kids) for (const k of kids.split(' ')) signalTree(Number(k), signal);
    }
    process.kill(pid, signal);
  } catch {
    // The process ended.
  }
}

/** A stored key record for benches that drive a limiter directly (the tests' keyRecord). */
export const benchKey = (id, rateLimit) => ({
  id,
  environment: 'production',
  label: id,
  consumer: id,
  scopes: [],
  rate_limit: rateLimit,
  replaces: null,
  secret_hash: id,
  created_at: 0,
  revoke_at: null,
  revoked_at: null,
  updated_at: 0,
});

/** The 1, 5 and 15 minute load averages, for a bench's heading. */
export const loadAverage = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/**
 * autocannon's setupRequest: a `traceparent` of a new random trace on each request,
 * whose flags are `flags`; or (`name` another header) the same bytes under a name the
 * gateway only forwards, so a load generator does the same work for a row without one
 * (a row whose requests cost it less to make is loaded harder).
 */
export const withTraceparent =
  (flags = '00', name = 'traceparent') =>
  (req) => {
    const id = randomBytes(24).toString('hex');
    req.headers = { ...req.headers, [name]: `00-${id.slice(0, 32)}-${id.slice(32)}-${flags}` };
    return req;
  };

/** The sum of a metric's samples (every label set) in Prometheus' text format. */
export function sumOfMetric(text, name) {
  let n = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)`, 'gm'))) n += Number(m[1]);
  return n;
}

/** The sum of a metric's samples (every label set) on a gateway's /metrics. */
export async function metricSum(opsUrl, name) {
  return sumOfMetric(await (await fetch(`${opsUrl}/metrics`)).text(), name);
}
