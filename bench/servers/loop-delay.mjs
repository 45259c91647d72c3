// Preloaded (--import) into each Node target of bench:proxy: the event loop's delay,
// sampled every 10 ms (monitorEventLoopDelay). SIGUSR2 writes the percentiles since the
// last SIGUSR2 to LOOP_DELAY_FILE, in ms beyond the 10 ms interval, and starts afresh.
import { renameSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const INTERVAL_MS = 10;
const h = monitorEventLoopDelay({ resolution: INTERVAL_MS });
h.enable();
const beyond = (ns) => Math.max(0, ns / 1e6 - INTERVAL_MS);
process.on('SIGUSR2', () => {
  const file = process.env.LOOP_DELAY_FILE;
  if (file) {
    // Written whole, then renamed: the reader never sees a file half written.
    writeFileSync(
      `${file}.tmp`,
      JSON.stringify({ p50: beyond(h.percentile(50)), p99: beyond(h.percentile(99)), max: beyond(h.max) }),
    );
    renameSync(`${file}.tmp`, file);
  }
  h.reset();
});
