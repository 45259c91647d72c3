import { afterAll, beforeAll } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { loadConfig } from '../../src/config/index.js';
import { FleetLimiter } from '../../src/fleet/buckets.js';
import { Coordinator } from '../../src/fleet/redis.js';
import { createLogger } from '../../src/log.js';
import { createMetrics, registerCoordination } from '../../src/metrics/index.js';
import type { QuotaWarning } from '../../src/ratelimit/limiter.js';
import type { LimitDecision } from '../../src/ratelimit/types.js';
import { startRedis, type TestRedis } from './redis.js';

/** A fleet shares its storage: the config names one (these tests never reach it). */
export const storage = { clickhouse_url: 'http://127.0.0.1:8123' };

export interface FleetInstance {
  limiter: FleetLimiter;
  metrics: ReturnType<typeof createMetrics>;
  co: Coordinator;
}

export interface InstanceOptions {
  /** Configuration besides storage and coordination (rate_limits, ...). */
  values?: Record<string, unknown>;
  /** Over the default coordination (this file's redis-server, timeout_ms 1000). */
  coordination?: Record<string, unknown>;
  /** Another redis-server than the file's. */
  url?: string;
  /** Instances alive, as the heartbeat would say. */
  instances?: () => number;
  onWarning?: (w: QuotaWarning) => void;
  /** The limiter's sweep running (limiter.start()). */
  start?: boolean;
}

/**
 * Limiters of a fleet on one real redis-server, in this process: each with its own
 * connection (an instance's worth). Starts the server before the file's tests and stops
 * every instance and the server after them.
 */
export function fleetOnRedis() {
  let redis: TestRedis;
  const made: FleetInstance[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const m of made) {
      await m.limiter.stop();
      await m.co.close();
    }
    await redis.stop();
  });
  return {
    redis: (): TestRedis => redis,
    async instance(o: InstanceOptions = {}): Promise<FleetInstance> {
      const url = o.url ?? redis.url;
      const cfg = loadConfig({
        values: { storage, ...o.values, coordination: { redis_url: url, timeout_ms: 1000, ...o.coordination } },
      });
      const metrics = createMetrics({ process: false });
      registerCoordination(metrics);
      const log = createLogger('silent');
      const co = new Coordinator({ url, timeoutMs: cfg.coordination.timeout_ms, log, metrics });
      await co.start();
      const limiter = new FleetLimiter({
        cfg,
        co,
        metrics,
        log,
        ...(o.instances ? { instances: o.instances } : {}),
        ...(o.onWarning ? { onWarning: o.onWarning } : {}),
      });
      if (o.start) limiter.start();
      const i = { limiter, metrics, co };
      made.push(i);
      return i;
    },
  };
}

export const settle = async (d: LimitDecision | Promise<LimitDecision>): Promise<LimitDecision> =>
  d instanceof Promise ? await d : d;

/** `n` decisions on `k` through `limiter`, `inFlight` at a time (each shown to `each`); the count admitted. */
export async function hammer(
  limiter: FleetLimiter,
  k: KeyRecord,
  n: number,
  inFlight = 16,
  each: (d: LimitDecision) => void = () => {},
): Promise<number> {
  let next = 0;
  let admitted = 0;
  const worker = async () => {
    while (next < n) {
      next++;
      const d = await settle(limiter.check(k, '', null, Date.now()));
      if (d.allowed) admitted++;
      each(d);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return admitted;
}
