// The cost of one bucket decision in shared memory (issue: under 1 µs): one thread
// alone, then every core at once on one hot key and on 10,000 keys.
// Run: npm run bench:buckets
import { availableParallelism } from 'node:os';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { loadConfig } from '../dist/config/index.js';
import { RateLimiter } from '../dist/ratelimit/limiter.js';
import { benchKey } from './lib.mjs';

const N = Number(process.env.BENCH_DECISIONS ?? 2_000_000);
const key = (id) => benchKey(id, { limit: 1_000_000_000, burst: 1_000_000_000, window: 'second' });

function run(limiter, keys, n) {
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  let now = 1_700_000_000_000;
  for (let i = 0; i < n; i++) {
    if (i % 64 === 0) now++;
    limiter.check(keys[i % keys.length], '', null, now);
  }
  const cpu = process.cpuUsage(c0);
  return { ns: Number(process.hrtime.bigint() - t0) / n, cpuNs: ((cpu.user + cpu.system) * 1000) / n };
}

if (!isMainThread) {
  const { layout, keyCount, n } = workerData;
  const limiter = new RateLimiter(loadConfig({ values: {} }), layout);
  const keys = Array.from({ length: keyCount }, (_, i) => key(`key_${i}`));
  run(limiter, keys, n / 10);
  parentPort.postMessage(run(limiter, keys, n));
} else {
  const cores = availableParallelism();
  const rows = [];
  for (const keyCount of [1, 10_000]) {
    const limiter = new RateLimiter(loadConfig({ values: {} }));
    const keys = Array.from({ length: keyCount }, (_, i) => key(`key_${i}`));
    run(limiter, keys, N / 10);
    rows.push({ threads: 1, keys: keyCount, ...run(limiter, keys, N) });
    for (const threads of [2, cores].filter((t, i, a) => t > 1 && a.indexOf(t) === i)) {
      const ws = Array.from(
        { length: threads },
        () => new Worker(new URL(import.meta.url), { workerData: { layout: limiter.layout, keyCount, n: N } }),
      );
      const res = await Promise.all(ws.map((w) => new Promise((r) => w.once('message', r))));
      await Promise.all(ws.map((w) => w.terminate()));
      const ns = res.reduce((a, r) => a + r.ns, 0) / res.length;
      // process.cpuUsage counts every thread of the process, so threads report wall time only.
      rows.push({ threads, keys: keyCount, ns, cpuNs: null });
    }
  }
  console.log('bucket decision, shared memory (ns per decision, each thread):');
  for (const r of rows)
    console.log(
      `  ${String(r.threads).padStart(2)} thread(s), ${String(r.keys).padStart(6)} key(s): ${r.ns.toFixed(0)} ns wall${r.cpuNs === null ? '' : `, ${r.cpuNs.toFixed(0)} ns CPU`}`,
    );
}
