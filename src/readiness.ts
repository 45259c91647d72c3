import type { Capture } from './capture/pipeline.js';
import type { EventBus } from './events/bus.js';
import { migrationsApplied } from './store/migrations.js';
import type { Store } from './store/store.js';

export interface Readiness {
  ok: boolean;
  body: Record<string, unknown>;
}

/**
 * What /readyz answers: storage up and migrated (or, during a storage outage, still
 * serving into the spool: ready, status degraded), or stopping.
 */
export async function readiness(store: Store, capture: Capture, bus: EventBus, stopping: boolean): Promise<Readiness> {
  if (stopping) return { ok: false, body: { status: 'stopping' } };
  const st = capture.batcher.stats;
  let storage = 'up';
  let migrations = false;
  try {
    migrations = await migrationsApplied(store);
  } catch {
    storage = 'down';
  }
  if (!st.storageUp || !bus.stats.storageUp) storage = 'down';
  // During a storage outage the gateway still serves (wakes go to the spool),
  // so it stays ready; the body and the metrics show the outage.
  const ok = storage === 'up' ? migrations : st.spoolBatches >= 0;
  return {
    ok,
    body: {
      status: storage === 'up' ? (migrations ? 'ready' : 'migrations pending') : 'degraded',
      storage,
      migrations_applied: migrations,
      wakes_buffered: capture.batcher.buffered,
      spool_bytes: st.spoolBytes,
      spool_batches: st.spoolBatches,
      events_spool_batches: bus.stats.spoolBatches,
    },
  };
}

/**
 * A fleet's /readyz also shows its coordination: whether Redis answers, what decisions
 * do while it does not (on_unavailable) and how many instances share each bucket. A
 * Redis outage leaves the gateway ready (every instance loses it at once, and
 * on_unavailable says how it serves meanwhile); the status says degraded.
 */
export function withCoordination(
  r: Readiness,
  limiter: { coordination(): { redis: 'up' | 'down' } | null },
): Readiness {
  const c = limiter.coordination();
  if (c === null) return r;
  const status = c.redis === 'down' && r.body.status === 'ready' ? 'degraded' : r.body.status;
  return { ok: r.ok, body: { ...r.body, status, coordination: c } };
}
