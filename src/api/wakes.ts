import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { GatewayError, missing } from '../errors.js';
import { idTime } from '../ids.js';
import type { WakeFilter } from '../store/wakes.js';
import type { ApiDeps } from './context.js';
import { decodeCursor, encodeCursor, filterFingerprint } from './cursor.js';
import { intParam, parseInput } from './parse.js';
import { templateFilter } from './path-template.js';
import { listEnvelope, wakeView } from './views.js';

export const listWakesQuery = z.strictObject({
  environment: z.string().max(64).optional(),
  status: intParam(100, 599).optional(),
  status_class: z.enum(['1xx', '2xx', '3xx', '4xx', '5xx']).optional(),
  path: z.string().min(1).max(1024).optional(),
  consumer: z.string().min(1).max(256).optional(),
  key_id: z.string().min(1).max(64).optional(),
  min_latency_ms: intParam(0, 2_147_483_647).optional(),
  limit: intParam(1, 100).optional(),
  cursor: z.string().min(1).max(512).optional(),
});

export const wakeIdParams = z.strictObject({ wake_id: z.string().max(64) });

/** The environment a query names, which must be the key's own (else 404, as for any foreign id). */
export function ownEnvironment(requested: string | undefined, keyEnv: string): string {
  if (requested !== undefined && requested !== keyEnv) {
    throw new GatewayError(
      'resource_missing',
      `environment ${JSON.stringify(requested)} is not visible to this key`,
      'environment',
    );
  }
  return keyEnv;
}

export function wakesPlugin(app: FastifyInstance, deps: ApiDeps): void {
  app.get(
    '/v2/wakes',
    {
      config: {
        auth: { scope: 'wakes:read' },
        doc: {
          summary: 'List wakes, newest first, with filters and cursor pagination',
          query: listWakesQuery,
          success: 200,
          object: 'list of wake',
          errors: [400, 401, 403, 404, 429],
        },
      },
    },
    async (request) => {
      const q = parseInput(listWakesQuery, request.query, 'query');
      if (q.status !== undefined && q.status_class !== undefined) {
        throw new GatewayError('invalid_request', 'status_class: cannot be combined with status', 'status_class');
      }
      const env = ownEnvironment(q.environment, request.key.environment);
      const filter: WakeFilter = { environment: env };
      if (q.status !== undefined) filter.status = q.status;
      if (q.status_class !== undefined) filter.statusClass = Number(q.status_class[0]);
      if (q.path !== undefined) {
        const t = templateFilter(q.path);
        if (t.exact !== null) filter.pathExact = t.exact;
        else {
          filter.pathPattern = t.pattern;
          filter.pathPrefix = t.prefix;
        }
      }
      if (q.consumer !== undefined) filter.consumer = q.consumer;
      if (q.key_id !== undefined) filter.keyId = q.key_id;
      if (q.min_latency_ms !== undefined) filter.minLatencyMs = q.min_latency_ms;
      const limit = q.limit ?? 20;
      const fp = filterFingerprint({ ...filter, pathPattern: q.path });
      const after = q.cursor !== undefined ? decodeCursor(q.cursor, fp) : null;
      const page = await deps.wakes.list(filter, limit, after, deps.clock.now());
      const last = page.rows[page.rows.length - 1];
      const next = page.hasMore && last ? encodeCursor({ t: last.captured_at, id: last.id }, fp) : null;
      return listEnvelope(page.rows.map(wakeView), page.hasMore, next);
    },
  );

  app.get(
    '/v2/wakes/:wake_id',
    {
      config: {
        auth: { scope: 'wakes:read' },
        doc: { summary: 'Read one wake', success: 200, object: 'wake', errors: [401, 403, 404] },
      },
    },
    async (request) => {
      const { wake_id } = parseInput(wakeIdParams, request.params, 'query');
      const t = wake_id.startsWith('wk_') ? idTime(wake_id) : null;
      if (t === null) throw missing('wake', 'wake_id');
      const w = await deps.wakes.get(request.key.environment, wake_id, t);
      if (!w) throw missing('wake', 'wake_id');
      return wakeView(w);
    },
  );
}
