import { createLogger, type Logger } from '../../src/log.js';
import type { WatchFiles } from '../../src/tls/reloader.js';

/**
 * A gateway's TLS file watch driven by the test: `reloaded()` fires it (as a changed
 * file would) and returns the log lines the reload wrote. Hand `log` and `tlsWatch` to
 * startGateway.
 */
export function manualTlsWatch(): {
  log: Logger;
  tlsWatch: { watch: WatchFiles; debounceMs: number };
  reloaded(): Promise<string[]>;
} {
  const lines: string[] = [];
  let changed: () => void = () => {};
  return {
    log: createLogger('info', (l) => lines.push(l)),
    tlsWatch: {
      watch: (_files, c) => {
        changed = c;
        return () => {};
      },
      debounceMs: 0,
    },
    async reloaded() {
      const before = lines.length;
      changed();
      // The debounce is a zero timer: the reload runs on the next turn.
      for (let i = 0; i < 100 && lines.length === before; i++) await new Promise((r) => setTimeout(r, 5));
      return lines.slice(before);
    },
  };
}
