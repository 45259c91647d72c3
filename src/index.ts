export { Gateway, type GatewayOptions } from './app.js';
export { type Clock, ManualClock, systemClock } from './clock.js';
export { type Config, ConfigError, loadConfig } from './config/index.js';
export { sign, verifySignature } from './webhooks/signer.js';
