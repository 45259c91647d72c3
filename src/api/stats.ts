import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { MANAGEMENT_ROUTES } from '../capture/wake-filter.js';
import { GatewayError } from '../errors.js';
import type { ApiDeps } from './context.js';
import { actingEnvironment, environmentParam } from './env.js';
import { parseInput } from './parse.js';
import { iso } from './views.js';
import { isoParam } from './wakes.js';

const HOUR = 3_600_000;
/** The longest range one call may ask for (a week of minutes per route). */
const MAX_RANGE = 7 * 24 * HOUR;

export const statsQuery = z.strictObject({
  environment: environmentParam,
  since: isoParam.optional(),
  until: isoParam.optional(),
  route: z.string().min(1).max(64).optional(),
  /** `exclude` leaves out the gateway's own traffic (routes v2 and console). */
  management: z.enum(['include', 'exclude']).optional(),
});

/** GET /v2/stats: per-route time series per minute (the console's Overview). */
export function statsPlugin(app: FastifyInstance, deps: ApiDeps): void {
  app.get(
    '/v2/stats',
    {
      config: {
        auth: { scope: 'wakes:read' },
        doc: {
          summary:
            'Requests, 5xx and p50/p95/p99 latency per route and minute over since..until (default: the last hour)',
          query: statsQuery,
          success: 200,
          object: 'stats',
          errors: [400, 401, 403, 404],
        },
      },
    },
    async (request) => {
      const q = parseInput(statsQuery, request.query, 'query');
      const env = actingEnvironment(deps, request, q.environment);
      const now = deps.clock.now();
      const until = q.until ?? now;
      const since = q.since ?? until - HOUR;
      if (since >= until) throw new GatewayError('invalid_request', 'since: must be before until', 'since');
      if (until - since > MAX_RANGE)
        throw new GatewayError('invalid_request', 'since: the range is at most 7 days', 'since');
      const rows = await deps.wakes.stats(
        env,
        since,
        until,
        q.route,
        q.management === 'exclude' ? MANAGEMENT_ROUTES : [],
      );
      const routes = new Map<string, { route: string; points: unknown[] }>();
      for (const r of rows) {
        let s = routes.get(r.route);
        if (!s) {
          s = { route: r.route, points: [] };
          routes.set(r.route, s);
        }
        s.points.push({
          minute: iso(r.minute),
          requests: r.requests,
          errors: r.errors,
          error_rate: r.requests === 0 ? 0 : r.errors / r.requests,
          p50_ms: r.p50,
          p95_ms: r.p95,
          p99_ms: r.p99,
        });
      }
      return { object: 'stats', environment: env, since: iso(since), until: iso(until), routes: [...routes.values()] };
    },
  );
}
