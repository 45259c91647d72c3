import type { MessagePort } from 'node:worker_threads';
import { ViaValues } from '../admission/via.js';
import { KeyHolds } from '../auth/key-holds.js';
import { KeyRing } from '../auth/keyring.js';
import { BatchRefused, type RowListener, type Sink } from '../capture/batcher.js';
import { createCapture } from '../capture/pipeline.js';
import type { Wake } from '../capture/wake.js';
import { type Clock, systemClock } from '../clock.js';
import { createEdge, shareOf } from '../edge.js';
import type { EventSink } from '../events/bus.js';
import { hasObjective } from '../events/slo.js';
import { wakeRules } from '../events/wake-rules.js';
import { localDeciders, rememberedInstances } from '../fleet/alive.js';
import { coordinatorFor, limiterPart } from '../fleet/limiter.js';
import { createLogger, type Logger } from '../log.js';
import { createMetrics, type Metrics, registerTracing } from '../metrics/index.js';
import { spansToControl } from '../tracing/hand-off.js';
import { spanSelector } from '../tracing/span-input.js';
import { HANDOVER_BUFFER_BYTES } from './answer-relay.js';
import { handOver } from './handover.js';
import type { EdgeData, EmittedEvent, FromEdge, SloRow, ToEdge } from './protocol.js';

/** What the thread's entry does with a running edge: its port, and what to do on a fatal error. */
export interface EdgeThread {
  port: number;
  log: Logger;
  /** A bug reached the top: every answered wake is written to this thread's log first. */
  failed(e: unknown): void;
}

/** The channel to the control thread: a worker's parentPort, or one end of a MessageChannel in a test. */
export type ControlPort = Pick<MessagePort, 'postMessage' | 'on'>;

/**
 * An edge thread's composition root: the main listener (beside the other edge threads,
 * SO_REUSEPORT) and the whole request path, with its own log stream; it never opens
 * the store. What must be one (storage, event rules, /v2) is the control thread's,
 * reached through the messages of protocol.ts. Each line builds one part from the
 * ones before it. Resolves once it listens; a listen that fails is told to the
 * control thread (`failed`) and rejects.
 */
export async function startEdgeThread(
  data: EdgeData,
  port: ControlPort,
  clock: Clock = systemClock,
): Promise<EdgeThread> {
  const cfg = shareOf(data.config, data.threads);
  const send = (m: FromEdge) => port.postMessage(m);
  const log = createLogger(cfg.log.level);
  const metrics = createMetrics({ process: false });
  // The tunnels this thread's edge holds, by key: cut as the control thread's versions revoke their keys.
  const holds = new KeyHolds(() => clock.now(), log);
  const ring = new KeyRing(null, log, null, (k) => holds.applied(k));
  for (const k of data.keys) ring.apply(k);
  const events = eventsToControl(send);
  // Its outages are logged by the control thread, once for the process.
  const co = await coordinatorFor(cfg, log, metrics, true);
  const limiting = limiterPart(cfg, {
    co,
    events,
    metrics,
    log,
    now: () => clock.now(),
    sweep: false,
    ...(data.buckets ? { layout: data.buckets } : {}),
    ...(data.authorityBuckets ? { authorityLayout: data.authorityBuckets } : {}),
    // A start while Redis is away splits buckets by the fleet's last count (the control thread remembers it).
    instancesAtStart: Math.max(rememberedInstances(cfg.storage.data_dir), localDeciders(data.threads)),
  });
  const inserts = insertsByControl(send);
  const spans = spansOfEdge(cfg, metrics, send);
  const capture = createCapture({
    cfg,
    clock,
    log,
    metrics,
    stream: `wakes-${data.index}`,
    sink: inserts.sink,
    redactionKey: Buffer.from(data.redactionKey),
    ...(data.retryMs === undefined ? {} : { retryMs: data.retryMs }),
    trace: spans?.hook ?? null,
  });
  capture.batcher.onRows(wakeRules(cfg, events));
  capture.batcher.onRows(sloRows(cfg.routes, send));
  const edge = createEdge({
    cfg,
    clock,
    log,
    metrics,
    ring,
    holds,
    limiter: limiting.limiter,
    capture,
    manage: handOver(data.internal, log, {
      sendTimeoutMs: cfg.server.send_timeout_ms,
      budgetBytes: HANDOVER_BUFFER_BYTES,
    }),
    reusePort: true,
    threadLabel: data.testHooks ? String(data.index) : null,
    tls: data.tls ?? null,
    via: new ViaValues(data.via),
  });

  /** Key uses go back to the control thread, which writes them (last_used_at) with its own. */
  const sendUsage = () => {
    const used = ring.takeUsage();
    if (used.size > 0) send({ type: 'usage', used: [...used] });
  };
  const usageTimer = setInterval(sendUsage, 1000);
  usageTimer.unref();

  const stop = async (graceMs: number): Promise<void> => {
    await edge.drain(graceMs);
    await capture.close();
    spans?.handOff.close();
    clearInterval(usageTimer);
    sendUsage();
    await edge.close();
    await limiting.close();
    await co?.close();
    send({ type: 'stopped' });
  };

  port.on('message', (m: ToEdge) => {
    switch (m.type) {
      case 'keys':
        for (const k of m.keys) ring.apply(k);
        send({ type: 'keys-held', seq: m.seq });
        return;
      case 'inserted':
        inserts.settled(m.id, m.error, m.refused === true);
        return;
      case 'metrics':
        capture.refreshGauges();
        void metrics.registry.getMetricsAsJSON().then((json) => send({ type: 'metrics', seq: m.seq, metrics: json }));
        return;
      case 'stop':
        void stop(m.graceMs);
        return;
      case 'tls':
        edge.setTls(m.material);
        return;
      case 'crash':
        setImmediate(() => {
          throw new Error('test hook: this edge thread was told to crash');
        });
        return;
    }
  });

  let listening: number;
  try {
    listening = await edge.listen(data.port);
  } catch (e) {
    send({ type: 'failed', message: (e as Error).message });
    clearInterval(usageTimer);
    await capture.close();
    await limiting.close();
    await co?.close();
    throw e;
  }
  // What this thread's log holds from an earlier run (a crash) is stored now, while serving.
  capture.batcher.resume();
  send({ type: 'listening', port: listening });
  return {
    port: listening,
    log,
    failed(e) {
      log.error('an edge thread failed', { thread: data.index, err: e as Error });
      capture.batcher.writeLog();
    },
  };
}

/** Events raised here (wake rules, quota warnings) go to the control thread's bus, a batch per turn. */
function eventsToControl(send: (m: FromEdge) => void): EventSink {
  let raised: EmittedEvent[] = [];
  return {
    emit(type, environment, eventData, at, dedupeKey, idAt) {
      raised.push({ type, environment, data: eventData, at, dedupeKey, idAt });
      if (raised.length === 1)
        queueMicrotask(() => {
          send({ type: 'events', events: raised });
          raised = [];
        });
    },
  };
}

/** With tracing on, the span inputs of this thread's finished requests go to the control thread in batches. */
function spansOfEdge(cfg: EdgeData['config'], metrics: Metrics, send: (m: FromEdge) => void) {
  if (cfg.tracing.otlp_url === null) return null;
  registerTracing(metrics);
  const handOff = spansToControl({
    send: (s) => send({ type: 'spans', spans: s }),
    max: cfg.tracing.queue_size,
    dropped: (n) => metrics.traceSpansDropped.labels('queue_full').inc(n),
  });
  return { handOff, hook: spanSelector(cfg, handOff.push) };
}

/** Inserts are the control thread's: a sealed segment's file crosses, not its rows. */
function insertsByControl(send: (m: FromEdge) => void) {
  let seq = 0;
  const waiting = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  const sink: Sink<Wake> = (rows, token, file) =>
    new Promise<void>((resolve, reject) => {
      const id = ++seq;
      waiting.set(id, { resolve, reject });
      send({ type: 'insert', id, token, file, rows: file === null ? [...rows] : [] });
    });
  const settled = (id: number, error: string | null, refused = false) => {
    const p = waiting.get(id);
    waiting.delete(id);
    if (error === null) p?.resolve();
    else p?.reject(refused ? new BatchRefused(error) : new Error(error));
  };
  return { sink, settled };
}

/** The SLO rules' share of each wake, for the control thread, which keeps them for every thread. */
function sloRows(routes: EdgeData['config']['routes'], send: (m: FromEdge) => void): RowListener<Wake> {
  const kept = new Set(routes.filter(hasObjective).map((r) => r.name));
  let rows: SloRow[] = [];
  return {
    row(w) {
      if (kept.has(w.route) && w.refused !== true)
        rows.push([w.route, w.environment, w.captured_at, w.status, w.latency_ms]);
    },
    end() {
      if (rows.length === 0) return;
      send({ type: 'slo', rows });
      rows = [];
    },
  };
}
