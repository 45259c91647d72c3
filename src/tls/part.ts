import type { Config } from '../config/index.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import type { Part } from '../root.js';
import type { TlsMaterial } from './material.js';
import { tlsMetrics } from './metrics.js';
import { certReloader, type Reloader, type WatchFiles } from './reloader.js';

/** A TLS listener whose certificates are reloaded: its config block, what start loaded, and how to apply new ones. */
export interface Reloadable {
  listener: string;
  at: string;
  settings: NonNullable<Config['server']['tls']>;
  initial: TlsMaterial;
  apply: (m: TlsMaterial) => void;
}

/**
 * The control thread's certificate reloads, one per TLS listener: each watches its
 * files; `reload` (SIGHUP) reads them all again now. The control thread owns this
 * because a worker thread never sees a signal, and because a file is then read,
 * checked and logged once for the process, not once per thread.
 */
export function tlsPart(d: {
  log: Logger;
  metrics: Metrics;
  listeners: Reloadable[];
  watch?: WatchFiles;
  debounceMs?: number;
}): Part & { reload(): boolean | null } {
  const metrics = tlsMetrics(d.metrics.registry);
  const reloaders: Reloader[] = d.listeners.map((l) =>
    certReloader({
      ...l,
      log: d.log,
      metrics,
      ...(d.watch ? { watch: d.watch } : {}),
      ...(d.debounceMs === undefined ? {} : { debounceMs: d.debounceMs }),
    }),
  );
  return {
    name: 'tls',
    // Null: no TLS listener, nothing to read again.
    reload: () => (reloaders.length === 0 ? null : reloaders.map((r) => r.reload()).every(Boolean)),
    close() {
      for (const r of reloaders) r.close();
    },
  };
}
