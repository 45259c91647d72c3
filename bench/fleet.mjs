// A fleet's bucket decisions through Redis (issue: exact across instances with few round
// trips): three instances (processes, each with its own connection) decide on one hot
// key and on 10,000 keys, unevenly (the first gets half the load), against a lone
// instance deciding in its own memory. Reports CPU per decision (the instances' and
// Redis's), Redis round trips per decision, and over-admission (must be 0).
// Then the uneven case of issue #34 (item 8), BENCH_FLEET_RUNS times (10): a burst-300 key
// through three instances taking 600, 200 and 100 decisions, 16 in flight each; one bucket
// admits exactly 300 (refilled 300 a day: nothing refills within a run), so each run must too.
// Run: npm run bench:fleet   (BENCH_FLEET_DECISIONS: the count; BENCH_FLEET_CONCURRENCY: decisions
// in flight per instance, 64 by default; 1 is the worst case, no two decisions share a call)
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { loadConfig } from '../dist/config/index.js';
import { FleetLimiter } from '../dist/fleet/buckets.js';
import { Coordinator } from '../dist/fleet/redis.js';
import { createLogger } from '../dist/log.js';
import { createMetrics, registerCoordination } from '../dist/metrics/index.js';
import { RateLimiter } from '../dist/ratelimit/limiter.js';
import { benchKey } from './lib.mjs';

const N = Number(process.env.BENCH_FLEET_DECISIONS ?? 200_000);
const CONCURRENCY = Number(process.env.BENCH_FLEET_CONCURRENCY ?? 64);
const RUNS = Number(process.env.BENCH_FLEET_RUNS ?? 10);
/** The uneven case: decisions per instance, in flight per instance, and its bucket. */
const UNEVEN = { split: [600, 200, 100], inFlight: 16, bucket: { keys: 1, limit: 300, burst: 300, window: 'day' } };
const SCENARIOS = {
  // Plenty of tokens: the leases' best case.
  hot: { keys: 1, limit: 1_000_000_000, burst: 1_000_000_000, window: 'second' },
  // One hot key that runs dry: 300 at once, then 200 a second.
  scarce: { keys: 1, limit: 12_000, burst: 300, window: 'minute' },
  // 10,000 keys of 10 each, then one a second: each runs dry (20 decisions a key).
  many: { keys: 10_000, limit: 60, burst: 10, window: 'minute' },
};
const key = (id, rl) => benchKey(id, { limit: rl.limit, burst: rl.burst, window: rl.window });

async function decide(limiter, keys, n) {
  let next = 0;
  let allowed = 0;
  const perKey = new Array(keys.length).fill(0);
  const worker = async () => {
    for (let i = next++; i < n; i = next++) {
      const d = await limiter.check(keys[i % keys.length], '', null, Date.now());
      if (d.allowed) {
        allowed++;
        perKey[i % keys.length]++;
      }
    }
  };
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const inFlight = Number(process.env.IN_FLIGHT ?? CONCURRENCY);
  await Promise.all(Array.from({ length: inFlight }, worker));
  const cpu = process.cpuUsage(c0);
  return { allowed, perKey, ms: performance.now() - t0, cpuUs: cpu.user + cpu.system };
}

if (process.env.FLEET_ROLE === 'instance') {
  const s = SCENARIOS[process.env.SCENARIO] ?? UNEVEN.bucket;
  const n = Number(process.env.DECISIONS);
  // A fleet shares its storage (named, never reached here).
  const storage = { clickhouse_url: 'http://127.0.0.1:8123' };
  const cfg = loadConfig({ values: { storage, coordination: { redis_url: process.env.REDIS_URL } } });
  const metrics = createMetrics({ process: false });
  registerCoordination(metrics);
  const log = createLogger('warn');
  const keys = Array.from({ length: s.keys }, (_, i) => key(`${process.env.SCENARIO}_${i}`, s));
  const co = new Coordinator({
    url: cfg.coordination.redis_url,
    timeoutMs: 1000,
    prefix: cfg.coordination.prefix,
    log,
    metrics,
  });
  await co.start();
  const limiter = new FleetLimiter({ cfg, co, metrics, log });
  limiter.start();
  // Wait for the others (all three start deciding together).
  await new Promise((r) => process.stdin.once('data', r));
  const res = await decide(limiter, keys, n);
  await limiter.stop();
  const trips = (await metrics.coordinationRoundTrips.get()).values.reduce((a, v) => a + v.value, 0);
  await co.close();
  process.stdout.write(`${JSON.stringify({ ...res, trips, n })}\n`);
  process.exit(0);
}

const freePort = () =>
  new Promise((resolve) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const p = srv.address().port;
      srv.close(() => resolve(p));
    });
  });

async function startRedis() {
  const port = await freePort();
  const p = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise((resolve) => {
    let out = '';
    p.stdout.on('data', (c) => {
      out += c;
      if (out.includes('Ready to accept connections')) resolve();
    });
  });
  return { url: `redis://127.0.0.1:${port}/0`, port, proc: p };
}

const cli = (port, ...args) =>
  new Promise((resolve) => {
    const c = spawn('redis-cli', ['-p', String(port), ...args]);
    let out = '';
    c.stdout.on('data', (d) => {
      out += d;
    });
    c.on('exit', () => resolve(out));
  });

async function redisCpuUs(port) {
  const info = await cli(port, 'INFO', 'cpu');
  const f = (k) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)?.[1] ?? 0);
  return (f('used_cpu_user') + f('used_cpu_sys')) * 1e6;
}

async function fleetRun(redis, name) {
  const s = SCENARIOS[name];
  // Uneven: the first instance gets half the decisions, the others a quarter each.
  const shares = [0.5, 0.25, 0.25];
  const procs = shares.map((share) =>
    spawn(process.execPath, [new URL(import.meta.url).pathname], {
      env: {
        ...process.env,
        FLEET_ROLE: 'instance',
        SCENARIO: name,
        DECISIONS: String(Math.round(N * share)),
        REDIS_URL: redis.url,
      },
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  await new Promise((r) => setTimeout(r, 1500));
  const cpu0 = await redisCpuUs(redis.port);
  const t0 = performance.now();
  const outs = await Promise.all(
    procs.map(
      (p) =>
        new Promise((resolve) => {
          let out = '';
          p.stdout.on('data', (c) => {
            out += c;
          });
          p.on('exit', () => resolve(JSON.parse(out)));
          p.stdin.write('go\n');
        }),
    ),
  );
  const wallS = (performance.now() - t0) / 1000;
  const redisUs = (await redisCpuUs(redis.port)) - cpu0;
  const n = outs.reduce((a, o) => a + o.n, 0);
  const allowed = outs.reduce((a, o) => a + o.allowed, 0);
  const trips = outs.reduce((a, o) => a + o.trips, 0);
  const cpuUs = outs.reduce((a, o) => a + o.cpuUs, 0);
  // What one bucket per key could have admitted from the first decision to the last.
  const rate = s.limit / { second: 1, minute: 60, hour: 3600 }[s.window];
  const bound = s.burst + Math.ceil(rate * wallS);
  let over = 0;
  for (let k = 0; k < s.keys; k++) {
    const got = outs.reduce((a, o) => a + o.perKey[k], 0);
    over += Math.max(0, got - bound);
  }
  return {
    n,
    allowed,
    over,
    tripsPerDecision: trips / n,
    cpuUsPerDecision: cpuUs / n,
    redisUsPerDecision: redisUs / n,
    perSecond: n / wallS,
  };
}

/** One run of the uneven case: what the fleet admitted on a fresh burst-300 key. */
async function unevenRun(redis, run) {
  const procs = UNEVEN.split.map((n) =>
    spawn(process.execPath, [new URL(import.meta.url).pathname], {
      env: {
        ...process.env,
        FLEET_ROLE: 'instance',
        SCENARIO: `uneven${run}`,
        DECISIONS: String(n),
        IN_FLIGHT: String(UNEVEN.inFlight),
        REDIS_URL: redis.url,
      },
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  await new Promise((r) => setTimeout(r, 1500));
  const outs = await Promise.all(
    procs.map(
      (p) =>
        new Promise((resolve) => {
          let out = '';
          p.stdout.on('data', (c) => {
            out += c;
          });
          p.on('exit', () => resolve(JSON.parse(out)));
          p.stdin.write('go\n');
        }),
    ),
  );
  return outs.reduce((a, o) => a + o.allowed, 0);
}

async function loneRun(name) {
  const s = SCENARIOS[name];
  const cfg = loadConfig({ values: {} });
  const limiter = new RateLimiter(cfg);
  const keys = Array.from({ length: s.keys }, (_, i) => key(`lone_${name}_${i}`, s));
  await decide(limiter, keys, Math.round(N / 10));
  const res = await decide(limiter, keys, N);
  return { n: N, allowed: res.allowed, cpuUsPerDecision: res.cpuUs / N, perSecond: N / (res.ms / 1000) };
}

const redis = await startRedis();
try {
  console.log(`bench:fleet: ${N} decisions per scenario, ${CONCURRENCY} in flight per instance`);
  for (const name of Object.keys(SCENARIOS)) {
    await cli(redis.port, 'FLUSHALL');
    const f = await fleetRun(redis, name);
    const l = await loneRun(name);
    console.log(
      `  ${name.padEnd(6)} fleet of 3: ${f.tripsPerDecision.toFixed(3)} round trips/decision, ` +
        `${f.cpuUsPerDecision.toFixed(2)} us CPU/decision in the instances + ${f.redisUsPerDecision.toFixed(2)} us in Redis, ` +
        `${Math.round(f.perSecond)}/s; admitted ${f.allowed}, over-admitted ${f.over}` +
        ` | lone: ${l.cpuUsPerDecision.toFixed(2)} us CPU/decision, ${Math.round(l.perSecond)}/s`,
    );
  }
  const admitted = [];
  for (let run = 0; run < RUNS; run++) admitted.push(await unevenRun(redis, run));
  const bucket = UNEVEN.bucket.burst;
  console.log(
    `  uneven (${UNEVEN.split.join('/')} decisions, ${UNEVEN.inFlight} in flight each, burst ${bucket}), ${RUNS} runs: ` +
      `admitted ${admitted.join(' ')} (one bucket: ${bucket}); ` +
      `over-admitted ${admitted.reduce((a, n) => a + Math.max(0, n - bucket), 0)}, ` +
      `refused that one bucket admits ${admitted.reduce((a, n) => a + Math.max(0, bucket - n), 0)}`,
  );
} finally {
  redis.proc.kill('SIGKILL');
}
