import { Worker } from 'node:worker_threads';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { KeyRecord } from '../auth/key.js';
import { isRefused, type RowListener, type Sink } from '../capture/batcher.js';
import type { Wake } from '../capture/wake.js';
import type { Config } from '../config/index.js';
import type { EventSink } from '../events/bus.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import { SharedBuckets, type SharedBucketsLayout } from '../ratelimit/shared-buckets.js';
import { StartError } from '../startup.js';
import type { EdgeTls } from '../tls/edge-tls.js';
import type { TlsMaterial } from '../tls/material.js';
import type { SpanInput } from '../tracing/span-input.js';
import type { EdgeData, FromEdge, ToEdge } from './protocol.js';

type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

export interface PoolDeps {
  cfg: Readonly<Config>;
  log: Logger;
  metrics: Metrics;
  threads: number;
  /** The shared-memory buckets; null in a fleet (each edge thread leases from Redis). */
  buckets: SharedBucketsLayout | null;
  /** In a fleet: the buckets of keys that hold keys:write, shared by every thread of this process. */
  authorityBuckets: SharedBucketsLayout | null;
  keys: () => KeyRecord[];
  redactionKey: Buffer;
  /** The gateway's `Via` name (admission/via.ts). */
  via: string;
  internal: EdgeData['internal'];
  retryMs: number | undefined;
  testHooks: boolean;
  /** Stores an edge's sealed batch. */
  insert: Sink<Wake>;
  events: EventSink;
  /** The SLO rules, kept here for every thread. */
  slo: RowListener<Wake>;
  usage: (id: string, sec: number) => void;
  /** server.tls as loaded at start (reloads come through publishTls). */
  tls: EdgeData['tls'];
  /** Span inputs of the edge threads (tracing on). */
  spans: (s: SpanInput[]) => void;
}

interface Thread {
  index: number;
  worker: Worker;
  /** The thread stopped on request (a clean stop), not died. */
  stopped: boolean;
}

/** A scrape waits at most this long for an edge thread's series. */
const METRICS_WAIT_MS = 2_000;

/**
 * The control thread's side of its edge threads: starts them on one port, hands
 * them key versions (and waits until each holds them), stores their sealed log
 * segments, hears their events, merges their metrics, starts again one that dies,
 * and stops them all, draining.
 */
export class EdgePool {
  readonly name = 'edges';
  private readonly threads = new Map<number, Thread>();
  private port = 0;
  private stopping = false;
  private seq = 0;
  private readonly waiting = new Map<number, { left: Set<number>; done: () => void }>();
  private readonly scrapes = new Map<number, { got: MetricsJson[]; left: Set<number>; done: () => void }>();
  /** Each thread's series as last scraped. */
  private readonly last = new Map<Thread, MetricsJson>();
  /**
   * The counters and histograms of threads that died, as last scraped: kept in every
   * scrape, so the process's counters do not fall back when a thread is started again.
   */
  private readonly retired: MetricsJson[] = [];

  /** The certificates as last reloaded: a thread started again serves these. */
  private tls: EdgeTls | null;

  constructor(private readonly d: PoolDeps) {
    this.tls = d.tls ?? null;
  }

  /** Starts every edge thread: the first picks the port (when it is 0), the others join it. */
  async start(port: number): Promise<number> {
    this.port = await this.spawn(1, port);
    await Promise.all(Array.from({ length: this.d.threads - 1 }, (_, i) => this.spawn(i + 2, this.port)));
    this.d.metrics.edgeThreads.set(this.threads.size);
    return this.port;
  }

  private spawn(index: number, port: number): Promise<number> {
    const d = this.d;
    const data: EdgeData = {
      config: d.cfg,
      index,
      threads: d.threads,
      port,
      buckets: d.buckets,
      authorityBuckets: d.authorityBuckets,
      keys: d.keys(),
      redactionKey: new Uint8Array(d.redactionKey),
      via: d.via,
      internal: d.internal,
      retryMs: d.retryMs,
      testHooks: d.testHooks,
      tls: this.tls,
    };
    const worker = new Worker(new URL('./edge-main.js', import.meta.url), { workerData: data });
    // Its slot-lock owner number (slot-lock.ts: OWNER), to release what it held if it dies.
    const owner = worker.threadId + 1;
    const t: Thread = { index, worker, stopped: false };
    this.threads.set(index, t);
    return new Promise<number>((resolve, reject) => {
      let listening = false;
      let failure: Error | null = null;
      worker.on('message', (m: FromEdge) => {
        if (m.type === 'listening') {
          listening = true;
          resolve(m.port);
        } else if (m.type === 'failed') {
          failure = new StartError(m.message);
        } else this.hear(t, m);
      });
      worker.on('error', (e) => {
        if (!listening) reject(e);
        else d.log.error('an edge thread failed', { thread: index, err: e });
      });
      worker.on('exit', (code) => {
        // A thread that died inside a decision no longer holds its buckets' locks.
        if (d.buckets) new SharedBuckets(d.buckets).releaseThread(owner);
        this.forget(t);
        if (!listening) return reject(failure ?? new Error(`edge thread ${index} exited (${code}) before it listened`));
        if (this.stopping || t.stopped) return;
        const seen = this.last.get(t);
        if (seen) this.retired.push(seen.filter((m) => String(m.type) !== 'gauge'));
        this.last.delete(t);
        // Its log stays on disk: the new thread stores what it holds, each row once.
        d.log.error('an edge thread died; starting it again', { thread: index, code });
        d.metrics.edgeRestarts.inc();
        this.spawn(index, this.port).catch((e) =>
          d.log.error('an edge thread could not be started again', { thread: index, err: e as Error }),
        );
      });
    });
  }

  /** A thread is gone: nothing waits on it any more. */
  private forget(t: Thread): void {
    if (this.threads.get(t.index) === t) this.threads.delete(t.index);
    for (const w of this.waiting.values()) {
      w.left.delete(t.index);
      if (w.left.size === 0) w.done();
    }
    for (const s of this.scrapes.values()) {
      s.left.delete(t.index);
      if (s.left.size === 0) s.done();
    }
  }

  private post(t: Thread, m: ToEdge): void {
    t.worker.postMessage(m);
  }

  private hear(t: Thread, m: FromEdge): void {
    const d = this.d;
    switch (m.type) {
      case 'keys-held': {
        const w = this.waiting.get(m.seq);
        w?.left.delete(t.index);
        if (w && w.left.size === 0) w.done();
        return;
      }
      case 'insert':
        d.insert(m.rows, m.token, m.file).then(
          () => this.post(t, { type: 'inserted', id: m.id, error: null }),
          (e: Error) => this.post(t, { type: 'inserted', id: m.id, error: e.message, refused: isRefused(e) }),
        );
        return;
      case 'events':
        for (const e of m.events) d.events.emit(e.type, e.environment, e.data, e.at, e.dedupeKey, e.idAt);
        return;
      case 'slo':
        for (const [route, environment, captured_at, status, latency_ms] of m.rows)
          d.slo.row({ route, environment, captured_at, status, latency_ms } as Wake);
        d.slo.end();
        return;
      case 'spans':
        d.spans(m.spans);
        return;
      case 'usage':
        for (const [id, sec] of m.used) d.usage(id, sec);
        return;
      case 'metrics': {
        const s = this.scrapes.get(m.seq);
        if (!s) return;
        s.got.push(m.metrics);
        this.last.set(t, m.metrics);
        s.left.delete(t.index);
        if (s.left.size === 0) s.done();
        return;
      }
      case 'stopped':
        t.stopped = true;
        void t.worker.terminate();
        return;
      case 'listening':
      case 'failed':
        return;
    }
  }

  /** Hands key versions to every edge thread; resolves once each holds them (or has gone). */
  publish(keys: KeyRecord[]): Promise<void> {
    if (this.threads.size === 0) return Promise.resolve();
    const seq = ++this.seq;
    return new Promise<void>((resolve) => {
      const left = new Set(this.threads.keys());
      this.waiting.set(seq, {
        left,
        done: () => {
          this.waiting.delete(seq);
          resolve();
        },
      });
      for (const t of this.threads.values()) this.post(t, { type: 'keys', seq, keys });
    });
  }

  /** The series of every edge thread and `own` (the control thread's), merged: counters summed, histograms merged. */
  async metrics(own: MetricsJson): Promise<string> {
    const seq = ++this.seq;
    const got: MetricsJson[] = [own, ...this.retired];
    if (this.threads.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => s.done(), METRICS_WAIT_MS);
        const s = {
          got,
          left: new Set(this.threads.keys()),
          done: () => {
            clearTimeout(timer);
            this.scrapes.delete(seq);
            resolve();
          },
        };
        this.scrapes.set(seq, s);
        for (const t of this.threads.values()) this.post(t, { type: 'metrics', seq });
      });
    }
    return AggregatorRegistry.aggregate(got).metrics();
  }

  /** Reloaded certificates for every edge thread (and any started again later). */
  publishTls(material: TlsMaterial): void {
    if (this.tls === null) return;
    this.tls = { ...this.tls, material };
    for (const t of this.threads.values()) this.post(t, { type: 'tls', material });
  }

  /** Tests only: edge thread `index` throws. */
  crash(index: number): boolean {
    const t = this.threads.get(index);
    if (!t) return false;
    this.post(t, { type: 'crash' });
    return true;
  }

  /** Stops every edge thread: each stops accepting, finishes what is in flight, stores its log. */
  async close(graceMs = 10_000): Promise<void> {
    this.stopping = true;
    const exits = [...this.threads.values()].map(
      (t) =>
        new Promise<void>((resolve) => {
          t.worker.once('exit', () => resolve());
          this.post(t, { type: 'stop', graceMs });
        }),
    );
    // A thread that does not finish within its grace and the time to store its log is ended.
    const kill = setTimeout(() => {
      for (const t of this.threads.values()) void t.worker.terminate();
    }, graceMs + 30_000);
    await Promise.all(exits);
    clearTimeout(kill);
    this.d.metrics.edgeThreads.set(0);
  }
}
