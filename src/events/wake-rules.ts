import type { RowListener } from '../capture/batcher.js';
import { wakeView } from '../capture/view.js';
import type { Wake } from '../capture/wake.js';
import type { Config } from '../config/index.js';
import { OWN_DELIVERY_AGENT } from '../delivery-mark.js';
import type { EventSink } from './bus.js';

/**
 * Whether a wake raises wake.error: a 5xx, unless it is the gateway's own delivery come
 * back to it (an endpoint on one of its routes): no event of it, or each failed delivery
 * would raise the next one without end (delivery-mark.ts). Tracing's `always_sample:
 * [errors]` reads the same rule.
 */
export const raisesError = (w: Pick<Wake, 'status' | 'user_agent'>): boolean =>
  w.status >= 500 && w.status < 600 && w.user_agent !== OWN_DELIVERY_AGENT;

/**
 * Whether a wake raises wake.slow against its route's objective (undefined: none): slower
 * than it, unless a tunnel's (101: its latency is how long the connection was held open)
 * or the gateway's own delivery. Tracing's `always_sample: [slow]` reads the same rule.
 */
export const raisesSlow = (w: Pick<Wake, 'status' | 'user_agent' | 'latency_ms'>, objective: number | undefined) =>
  objective !== undefined && w.latency_ms > objective && w.status !== 101 && w.user_agent !== OWN_DELIVERY_AGENT;

/**
 * Raises wake.error for every 5xx wake and wake.slow for every wake slower than
 * its route's latency objective (a tunnel's excepted: its latency is its lifetime), as each wake is captured (a status and a lookup;
 * the rare event is built only when it is raised).
 */
export function wakeRules(cfg: Pick<Config, 'routes'>, events: EventSink): RowListener<Wake> {
  const objectives = new Map<string, number>();
  for (const r of cfg.routes) if (r.latency_objective_ms !== null) objectives.set(r.name, r.latency_objective_ms);
  return {
    row(w) {
      // Ids come from the wake's: a wake heard again after a crash raises the same events, not new ones.
      if (raisesError(w)) events.emit('wake.error', w.environment, { wake: wakeView(w) }, w.captured_at, w.id);
      const objective = objectives.get(w.route);
      if (raisesSlow(w, objective)) {
        events.emit('wake.slow', w.environment, { wake: wakeView(w), objective_ms: objective }, w.captured_at, w.id);
      }
    },
    end() {},
  };
}
