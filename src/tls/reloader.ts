import { unwatchFile, watchFile } from 'node:fs';
import type { ListenerTls } from '../config/tls-schema.js';
import type { Logger } from '../log.js';
import { filesOf, readMaterial, type TlsMaterial } from './material.js';
import type { TlsMetrics } from './metrics.js';

/** Calls `changed` when one of `files` changes; returns how to stop. */
export type WatchFiles = (files: string[], changed: () => void) => () => void;

/**
 * Polls each file's stat (fs.watchFile): it survives what fs.watch does not, a file
 * replaced by a rename or a symlink swapped (how cert-manager and Kubernetes secrets
 * update), at the cost of a stat a second per file.
 */
export const pollFiles: WatchFiles = (files, changed) => {
  const on = (cur: { mtimeMs: number; ino: number }, prev: { mtimeMs: number; ino: number }) => {
    if (cur.mtimeMs !== prev.mtimeMs || cur.ino !== prev.ino) changed();
  };
  for (const f of files) watchFile(f, { interval: 1000, persistent: false }, on);
  return () => {
    for (const f of files) unwatchFile(f, on);
  };
};

export interface ReloaderDeps {
  settings: ListenerTls;
  /** The block's config path (server.tls), for the log line. */
  at: string;
  /** The listener's name in metrics and logs. */
  listener: string;
  log: Logger;
  metrics: TlsMetrics;
  /** What start loaded (already serving). */
  initial: TlsMaterial;
  /** Hands checked certificates to every thread serving the listener. */
  apply: (m: TlsMaterial) => void;
  watch?: WatchFiles;
  /** Changes closer together than this are one reload (a cert and its key written one after the other). */
  debounceMs?: number;
}

export interface Reloader {
  readonly name: string;
  /** Reads the files again now (SIGHUP); true when the new certificates serve. */
  reload(): boolean;
  close(): void;
}

/**
 * Certificates (and the ticket_keys_file's keys) reloaded without a restart: when
 * their files change, and on SIGHUP. The files are read and checked here, once for
 * the process (the control thread); only what loads reaches the threads. A file that
 * does not leaves the old certificates and keys serving, said in one log line and a metric.
 */
export function certReloader(d: ReloaderDeps): Reloader {
  const expiry = (m: TlsMaterial) =>
    m.expiries.forEach((t, i) => {
      d.metrics.expiry.labels(d.listener, String(i)).set(Math.floor(t / 1000));
    });
  expiry(d.initial);
  const reload = (): boolean => {
    let m: TlsMaterial;
    try {
      m = readMaterial(d.settings, d.at);
    } catch (e) {
      d.metrics.reloadFailures.labels(d.listener).inc();
      d.log.warn('TLS certificates not reloaded: the ones loaded before keep serving', {
        listener: d.listener,
        reason: (e as Error).message,
      });
      return false;
    }
    d.apply(m);
    expiry(m);
    d.metrics.reloads.labels(d.listener).inc();
    d.log.info('TLS certificates reloaded', {
      listener: d.listener,
      certificates: m.certs.length,
      ...(m.tickets?.kind === 'file' ? { ticket_keys: m.tickets.keys.length } : {}),
    });
    return true;
  };
  const wait = d.debounceMs ?? 500;
  let timer: NodeJS.Timeout | null = null;
  const changed = () => {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = null;
      reload();
    }, wait);
    timer.unref();
  };
  const stop = (d.watch ?? pollFiles)(filesOf(d.settings), changed);
  return {
    name: `tls-${d.listener}`,
    reload,
    close() {
      stop();
      if (timer !== null) clearTimeout(timer);
    },
  };
}
