import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import type { Clock } from '../clock.js';
import type { Config } from '../config/index.js';
import { markKey } from '../delivery-mark.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import { accessLog } from './access-log.js';
import { Batcher, type Sink } from './batcher.js';
import { DetailBudget, detailSize } from './detail.js';
import { type Exchange, Recorder } from './recorder.js';
import { Redactor } from './redact.js';
import type { Wake } from './wake.js';
import { LOG_SEGMENT_TAG, wakeLogCodec } from './wake-log.js';
import { Wal, type WalCodec } from './wal.js';

/** The write-ahead log of one stream, taking over what an earlier version left in its spool. */
export function openLog<T>(
  cfg: Readonly<Config>,
  log: Logger,
  name: string,
  codec?: WalCodec<T>,
  tag?: string,
): Wal<T> {
  const wal = new Wal<T>(
    join(cfg.storage.data_dir, 'wal', name),
    cfg.storage.spool_max_bytes,
    {
      syncIntervalMs: cfg.wal.sync_interval_ms,
      fsyncIntervalMs: cfg.wal.fsync_interval_ms,
      // Rows the disk will not take wait in memory as rows waiting for a batch do, and
      // their lines (detail included) within what detail waiting in memory may take.
      maxHeldRows: cfg.capture.max_buffered_rows,
      maxHeldBytes: cfg.capture.detail_max_buffered_bytes,
      ...(tag ? { tag } : {}),
    },
    log,
    codec,
  );
  const adopted = wal.adoptLegacySpool(join(cfg.storage.data_dir, 'spool', name));
  if (adopted)
    log.info('spooled batches of an earlier version taken into the write-ahead log', { name, batches: adopted });
  // What an earlier run (a crash, or storage down at its stop) left: stored now, each row once.
  if (wal.length > 0)
    log.info('recovering from the write-ahead log', { log: name, segments: wal.length, bytes: wal.size });
  return wal;
}

export const retentionOf = (cfg: Readonly<Config>) => (env: string) =>
  (Object.hasOwn(cfg.environments, env) ? cfg.environments[env]?.wake_retention_days : undefined) ?? 30;

/** The key of the redaction HMAC, from the instance's sealing key (domain-separated). */
export const redactionKey = (sealingKey: Buffer): Buffer =>
  createHmac('sha256', sealingKey).update('wakegate redaction v1').digest();

export interface CaptureDeps {
  cfg: Readonly<Config>;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  /** The write-ahead log stream's name (one per thread that captures). */
  stream: string;
  /** Stores one sealed batch (the control thread's inserter, or a message to it). */
  sink: Sink<Wake>;
  redactionKey: Buffer;
  /** How often spooled batches are retried while storage is down. */
  retryMs?: number;
  /** Tracing on: shown each finished wake of a trace (tracing/span-input.ts spanSelector). */
  trace?: ((x: Exchange, w: Wake, end: number) => void) | null;
}

/** Capture: the recorder that turns exchanges into wakes, and the batcher that writes them through the log. */
export interface Capture {
  readonly name: 'capture';
  recorder: Recorder;
  batcher: Batcher<Wake>;
  redactor: Redactor;
  /** Sets the gauges of what this capture holds (summed over threads in /metrics). */
  refreshGauges(): void;
  /** Flushes every wake, then closes the log (what storage did not take stays in it). */
  close(): Promise<void>;
}

export function createCapture(d: CaptureDeps): Capture {
  const { cfg, metrics } = d;
  const retention = retentionOf(cfg);
  // Detail waiting in memory is bounded (the budget); once a wake's line is queued
  // in the log its detail is let go, and its share of the budget comes back.
  const budget = new DetailBudget(cfg.capture.detail_max_buffered_bytes);
  const wal = openLog<Wake>(
    cfg,
    d.log,
    d.stream,
    wakeLogCodec(retention, (detail) => budget.give(detailSize(detail))),
    // Its segments are inserted through the log table (migration 13), told apart from an earlier version's.
    LOG_SEGMENT_TAG,
  );
  const batcher = new Batcher<Wake>(
    {
      batchRows: cfg.capture.batch_rows,
      flushIntervalMs: cfg.capture.flush_interval_ms,
      maxBufferedRows: cfg.capture.max_buffered_rows,
      maxInflight: cfg.capture.max_inflight_batches,
      retryIntervalMs: d.retryMs ?? 1000,
      // A wake is its log line from the moment it is pushed: nothing holds it until its batch is stored.
      rowsInLog: true,
      onDrop: (n, reason) => metrics.wakesDropped.labels(reason).inc(n),
      onFlush: (n, ms) => {
        metrics.wakesFlushed.inc(n);
        metrics.flushDuration.observe(ms / 1000);
      },
    },
    d.sink,
    wal,
    d.log,
  );
  // Both series are shown from the start, at 0.
  const skipped = { rate: metrics.detailsSkipped.labels('rate'), memory: metrics.detailsSkipped.labels('memory') };
  const redactor = new Redactor(d.redactionKey, cfg.capture.redact_headers, cfg.capture.redact_fields);
  const access = cfg.log.access ? accessLog() : null;
  const recorder = new Recorder({
    markKey: markKey(d.redactionKey),
    clock: d.clock,
    metrics,
    region: cfg.server.region,
    capture: (w) => {
      w.retention_days = retention(w.environment);
      access?.(w);
      // A wake the batcher refused (counted as dropped) never reaches the log, which
      // gives a detail's share of the budget back once its line is queued: give it here.
      if (!batcher.push(w) && w.detail) budget.give(detailSize(w.detail));
    },
    detail: { redactor, budget, onSkip: (reason) => skipped[reason].inc() },
    trace: d.trace ?? null,
  });
  const refreshGauges = () => {
    metrics.wakesBuffered.set(batcher.buffered);
    metrics.spoolBytes.set(batcher.stats.spoolBytes);
    metrics.spoolBatches.set(batcher.stats.spoolBatches);
  };
  return { name: 'capture', recorder, batcher, redactor, refreshGauges, close: () => batcher.stop() };
}
