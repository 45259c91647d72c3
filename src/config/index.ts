export { ConfigError, type LoadOptions, loadConfig, mergeConfig } from './loader.js';

import { type Config, MAX_TIMER_MS } from './schema.js';

export type { Config, EnvironmentConfig, RateLimitPolicy, RateWindow, RouteConfig } from './schema.js';

/**
 * How long a stop lets requests in flight finish: `server.drain_timeout_ms`, else the
 * longest route `timeout_ms` plus 5 s, so a request a route allows is never cut by a
 * shorter built-in limit.
 */
export function drainTimeoutMs(cfg: Pick<Config, 'server' | 'routes'>): number {
  if (cfg.server.drain_timeout_ms !== null) return cfg.server.drain_timeout_ms;
  // No timer waits past MAX_TIMER_MS (Node would fire at once, cutting every request).
  return Math.min(cfg.routes.reduce((m, r) => Math.max(m, r.timeout_ms), 0) + 5_000, MAX_TIMER_MS);
}
