import type { RowListener } from '../capture/batcher.js';
import { wakeView } from '../capture/view.js';
import type { Wake } from '../capture/wake.js';
import type { Config } from '../config/index.js';
import { OWN_DELIVERY_AGENT } from '../delivery-mark.js';
import type { EventSink } from './bus.js';

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
      // The gateway's own delivery come back to it (an endpoint on one of its routes): no event
      // of it, or each failed delivery would raise the next one without end (delivery-mark.ts).
      if (w.user_agent === OWN_DELIVERY_AGENT) return;
      // Ids come from the wake's: a wake heard again after a crash raises the same events, not new ones.
      if (w.status >= 500 && w.status < 600)
        events.emit('wake.error', w.environment, { wake: wakeView(w) }, w.captured_at, w.id);
      const objective = objectives.get(w.route);
      // A tunnel's wake (101) lasts as long as its connection is held open: not a slow answer.
      if (objective !== undefined && w.latency_ms > objective && w.status !== 101) {
        events.emit('wake.slow', w.environment, { wake: wakeView(w), objective_ms: objective }, w.captured_at, w.id);
      }
    },
    end() {},
  };
}
