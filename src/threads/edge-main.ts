import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { KeyRing } from '../auth/keyring.js';
import type { RowListener, Sink } from '../capture/batcher.js';
import { createCapture } from '../capture/pipeline.js';
import type { Wake } from '../capture/wake.js';
import { systemClock } from '../clock.js';
import { createEdge, shareOf } from '../edge.js';
import type { EventSink } from '../events/bus.js';
import { hasObjective } from '../events/slo.js';
import { wakeRules } from '../events/wake-rules.js';
import { coordinatorFor, limiterPart } from '../fleet/limiter.js';
import { createLogger } from '../log.js';
import { createMetrics } from '../metrics/index.js';
import { HANDOVER_BUFFER_BYTES } from './answer-relay.js';
import { handOver } from './handover.js';
import type { EdgeData, EmittedEvent, FromEdge, SloRow, ToEdge } from './protocol.js';

/**
 * An edge thread: the main listener (beside the other edge threads, SO_REUSEPORT)
 * and the whole request path, with its own log stream; it never opens the store.
 * What must be one (storage, event rules, /v2) is the control thread's, reached
 * through the messages of protocol.ts.
 */
const data = workerData as EdgeData;
const port = parentPort as MessagePort;
const cfg = shareOf(data.config, data.threads);
const send = (m: FromEdge) => port.postMessage(m);
const log = createLogger(cfg.log.level);
const metrics = createMetrics({ process: false });

const ring = new KeyRing(null, log);
for (const k of data.keys) ring.apply(k);

/** Events raised here (wake rules, quota warnings) go to the control thread's bus, a batch per turn. */
let raised: EmittedEvent[] = [];
const events: EventSink = {
  emit(type, environment, eventData, at, dedupeKey) {
    raised.push({ type, environment, data: eventData, at, dedupeKey });
    if (raised.length === 1)
      queueMicrotask(() => {
        send({ type: 'events', events: raised });
        raised = [];
      });
  },
};

// Its outages are logged by the control thread, once for the process.
const co = await coordinatorFor(cfg, log, metrics, true);
const limiting = limiterPart(cfg, {
  co,
  events,
  metrics,
  log,
  now: () => systemClock.now(),
  sweep: false,
  ...(data.buckets ? { layout: data.buckets } : {}),
});
const limiter = limiting.limiter;

/** Inserts are the control thread's: a sealed segment's file crosses, not its rows. */
let insertSeq = 0;
const inserting = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
const sink: Sink<Wake> = (rows, token, file) =>
  new Promise<void>((resolve, reject) => {
    const id = ++insertSeq;
    inserting.set(id, { resolve, reject });
    send({ type: 'insert', id, token, file, rows: file === null ? [...rows] : [] });
  });

const capture = createCapture({
  cfg,
  clock: systemClock,
  log,
  metrics,
  stream: `wakes-${data.index}`,
  sink,
  redactionKey: Buffer.from(data.redactionKey),
  ...(data.retryMs === undefined ? {} : { retryMs: data.retryMs }),
});
capture.batcher.onRows(wakeRules(cfg, events));
capture.batcher.onRows(sloRows(cfg.routes));

const edge = createEdge({
  cfg,
  clock: systemClock,
  log,
  metrics,
  ring,
  limiter,
  capture,
  manage: handOver(data.internal, log, {
    sendTimeoutMs: cfg.server.send_timeout_ms,
    budgetBytes: HANDOVER_BUFFER_BYTES,
  }),
  reusePort: true,
  threadLabel: data.testHooks ? String(data.index) : null,
});

/** Key uses go back to the control thread, which writes them (last_used_at) with its own. */
const sendUsage = () => {
  const used = ring.takeUsage();
  if (used.size > 0) send({ type: 'usage', used: [...used] });
};
const usageTimer = setInterval(sendUsage, 1000);
usageTimer.unref();

port.on('message', (m: ToEdge) => {
  switch (m.type) {
    case 'keys':
      for (const k of m.keys) ring.apply(k);
      send({ type: 'keys-held', seq: m.seq });
      return;
    case 'inserted': {
      const p = inserting.get(m.id);
      inserting.delete(m.id);
      if (m.error === null) p?.resolve();
      else p?.reject(new Error(m.error));
      return;
    }
    case 'metrics':
      capture.refreshGauges();
      void metrics.registry.getMetricsAsJSON().then((json) => send({ type: 'metrics', seq: m.seq, metrics: json }));
      return;
    case 'stop':
      void stop(m.graceMs);
      return;
    case 'crash':
      setImmediate(() => {
        throw new Error('test hook: this edge thread was told to crash');
      });
      return;
  }
});

async function stop(graceMs: number): Promise<void> {
  await edge.drain(graceMs);
  await capture.close();
  clearInterval(usageTimer);
  sendUsage();
  await edge.close();
  await limiting.close();
  await co?.close();
  send({ type: 'stopped' });
}

// A bug that reaches the top: every answered wake is written to this thread's log
// first, then the thread ends and the control thread starts another, which stores it.
process.on('uncaughtException', (e) => {
  log.error('an edge thread failed', { thread: data.index, err: e });
  capture.batcher.writeLog();
  process.exit(1);
});

let listening: number;
try {
  listening = await edge.listen(data.port);
} catch (e) {
  send({ type: 'failed', message: (e as Error).message });
  process.exit(1);
}
// What this thread's log holds from an earlier run (a crash) is stored now, while serving.
capture.batcher.resume();
send({ type: 'listening', port: listening });

/** The SLO rules' share of each wake, for the control thread, which keeps them for every thread. */
function sloRows(routes: EdgeData['config']['routes']): RowListener<Wake> {
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
