import { bucketOf } from '../auth/key.js';
import type { Config } from '../config/index.js';
import type { EventSink } from '../events/bus.js';
import type { Logger } from '../log.js';
import { type Metrics, registerCoordination } from '../metrics/index.js';
import { type QuotaWarning, quotaWarningData, RateLimiter } from '../ratelimit/limiter.js';
import type { SharedBucketsLayout } from '../ratelimit/shared-buckets.js';
import type { RequestLimiter } from '../ratelimit/types.js';
import { Heartbeat } from './alive.js';
import { AuthorityLocal } from './authority-local.js';
import { FleetLimiter } from './buckets.js';
import type { Coordinator } from './redis.js';

/** A thread's rate limiter: the fleet's (Redis) when coordination.redis_url is set, else the shared-memory one. */
export interface LimiterPart {
  name: 'limiter';
  limiter: RequestLimiter;
  /** Buckets (or leases) held here, for wakegate_ratelimit_buckets. */
  size(): number;
  /** The shared-memory table for edge threads; null in a fleet (each thread leases on its own). */
  layout: SharedBucketsLayout | null;
  /** In a fleet: the table of keys that hold keys:write, shared by every thread of the process; else null. */
  authorityLayout: SharedBucketsLayout | null;
  /** The fleet's coordination as /readyz shows it; null for a gateway alone. */
  coordination(): CoordinationState | null;
  close(): Promise<void>;
}

/** Whether Redis answers, what this gateway does while it does not, and how many instances share each bucket. */
export interface CoordinationState {
  redis: 'up' | 'down';
  on_unavailable: 'local' | 'open' | 'closed';
  instances: number;
}

/** The connection to the fleet's Redis, or null for a gateway alone. */
export async function coordinatorFor(
  cfg: Pick<Config, 'coordination'>,
  log: Logger,
  metrics: Metrics,
  quiet = false,
): Promise<Coordinator | null> {
  const url = cfg.coordination.redis_url;
  if (url === null) return null;
  registerCoordination(metrics);
  metrics.coordinationMode.labels(cfg.coordination.on_unavailable).set(1);
  metrics.coordinationInstances.set(1);
  // Imported here: the Redis client is over 400 modules (about 140 ms of CPU at every
  // start of a process or edge thread), loaded only by a gateway in a fleet.
  const { Coordinator } = await import('./redis.js');
  const co = new Coordinator({
    url,
    timeoutMs: cfg.coordination.timeout_ms,
    prefix: cfg.coordination.prefix,
    log,
    metrics,
    quiet,
  });
  await co.start();
  return co;
}

/** The limiter; its quota warnings become consumer.quota.warning events. */
export function limiterPart(
  cfg: Pick<Config, 'rate_limits' | 'environments' | 'ratelimit' | 'coordination'>,
  o: {
    co: Coordinator | null;
    events: EventSink;
    metrics: Metrics;
    log: Logger;
    now: () => number;
    layout?: SharedBucketsLayout;
    /** In a fleet: the control thread's table of keys that hold keys:write (an edge thread is handed it). */
    authorityLayout?: SharedBucketsLayout;
    sweep?: boolean;
    /** In a fleet: instances to split each bucket by until Redis first answers (alive.ts). */
    instancesAtStart?: number;
    /** In a fleet: told each count of instances Redis gives (the control thread remembers it in DATA_DIR). */
    remember?: (instances: number) => void;
  },
): LimiterPart {
  // Its id from the key's bucket, threshold and window: raised again (after a kill, before
  // the buckets file said it was), it is the same event, delivered once.
  const warn = (w: QuotaWarning) =>
    o.events.emit(
      'consumer.quota.warning',
      w.key.environment,
      quotaWarningData(w),
      undefined,
      `${bucketOf(w.key)}:${w.threshold}:${w.windowStart}`,
      w.windowStart,
    );
  if (o.co) {
    const co = o.co;
    const alive = new Heartbeat(
      co,
      (n) => {
        o.metrics.coordinationInstances.set(n);
        o.remember?.(n);
      },
      o.instancesAtStart,
    );
    o.metrics.coordinationInstances.set(alive.instances);
    const fleet = new FleetLimiter({
      cfg,
      co,
      metrics: o.metrics,
      log: o.log,
      onWarning: warn,
      instances: () => alive.instances,
    });
    fleet.start();
    alive.start();
    // Keys that hold keys:write are limited here alone: Redis cannot lock out the admin.
    // Few keys hold it: a small table of their buckets (and their routes' policies).
    // One table for the process, shared by its edge threads as the lone gateway's is.
    const own = new RateLimiter(
      { ...cfg, ratelimit: { max_buckets: 4096, sketch_cells: 4096 } },
      o.authorityLayout,
      warn,
    );
    if (o.sweep !== false) own.start(o.now);
    return {
      name: 'limiter',
      limiter: new AuthorityLocal(fleet, own),
      size: () => fleet.size,
      layout: null,
      authorityLayout: own.layout,
      coordination: () => ({
        redis: co.answering ? 'up' : 'down',
        on_unavailable: cfg.coordination.on_unavailable,
        instances: alive.instances,
      }),
      close: async () => {
        own.stop();
        await fleet.stop();
        await alive.stop();
      },
    };
  }
  const local = new RateLimiter(cfg, o.layout, warn);
  // The shared table is swept by the thread that made it (the control thread), not by every edge.
  if (o.sweep !== false) local.start(o.now);
  return {
    name: 'limiter',
    limiter: local,
    size: () => local.size,
    layout: local.layout,
    authorityLayout: null,
    coordination: () => null,
    close: async () => local.stop(),
  };
}
