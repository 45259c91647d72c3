// An open-loop load at a fixed rate, for latency: request i is due at start + i/rate,
// sent on any free connection of a pool, and its latency runs from when it was due to
// when its answer's last byte arrived, so a target that falls behind is charged for
// the wait (what wrk2 does). autocannon's `overallRate` is no such load: each of its
// connections sends as fast as it is answered until its quota for the second is
// spent, then waits for the next second, so every second starts with a burst at full
// concurrency and its percentiles are mostly that burst's queue.
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';

/**
 * @param {{url: string, rate: number, duration: number, connections?: number, headers?: Record<string,string>}} opts
 *   url with path and query; rate in requests a second; duration in seconds.
 * @returns {Promise<{latency: {p50: number, p90: number, p99: number, max: number}, requests: {total: number, average: number},
 *   '2xx': number, non2xx: number, errors: number, timeouts: number, late: number}>} latencies in ms;
 *   `late`: how many were sent 1 ms or more after they were due (the generator's own lag).
 */
export async function steady({ url, rate, duration, connections = 20, headers = {} }) {
  const u = new URL(url);
  const pool = new Pool(u.origin, { connections, pipelining: 1, keepAliveTimeout: 30_000 });
  const path = u.pathname + u.search;
  const total = Math.round(rate * duration);
  const latencies = new Float64Array(total);
  const counts = { ok: 0, non2xx: 0, errors: 0, late: 0 };
  let sent = 0;
  let done = 0;
  const interval = 1000 / rate;
  const start = performance.now() + 5;
  let finish;
  const finished = new Promise((r) => {
    finish = r;
  });

  const one = async (i, due) => {
    try {
      const { statusCode, body } = await pool.request({ path, method: 'GET', headers });
      await body.dump();
      if (statusCode >= 200 && statusCode < 300) counts.ok++;
      else counts.non2xx++;
    } catch {
      counts.errors++;
    }
    latencies[i] = performance.now() - due;
    if (++done === total) finish();
  };

  const tick = () => {
    const now = performance.now();
    while (sent < total) {
      const due = start + sent * interval;
      if (due > now) break;
      if (now - due >= 1) counts.late++;
      one(sent, due);
      sent++;
    }
    if (sent < total) setTimeout(tick, Math.max(0, Math.min(1, start + sent * interval - performance.now())));
  };
  setTimeout(tick, 5);
  await finished;
  await pool.close();

  const sorted = Array.from(latencies).sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return {
    latency: { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: sorted[sorted.length - 1] },
    requests: { total, average: total / duration },
    '2xx': counts.ok,
    non2xx: counts.non2xx,
    errors: counts.errors,
    timeouts: 0,
    late: counts.late,
  };
}
