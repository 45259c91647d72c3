export { ConfigError, type LoadOptions, loadConfig, mergeConfig } from './loader.js';
export type { Config, EnvironmentConfig, RateLimitPolicy, RateWindow, RouteConfig } from './schema.js';
