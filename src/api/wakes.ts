import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { MANAGEMENT_ROUTES, type WakeFilter } from '../capture/wake-filter.js';
import { GatewayError, missing } from '../errors.js';
import { idTime } from '../ids.js';
import type { ApiDeps } from './context.js';
import { filterFingerprint } from './cursor.js';
import { actingEnvironment, environmentParam } from './env.js';
import { intParam, isRealDate, parseInput } from './parse.js';
import { templateFilter } from './path-template.js';
import { listEnvelope, wakeDetailView, wakeView } from './views.js';

/**
 * ISO 8601 with a zone: seconds optional, up to nine fractional digits (Python's
 * isoformat() gives microseconds; past milliseconds they are cut, not rounded), and
 * `Z` or an offset of at most ±23:59. A text that still names no instant is refused.
 */
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;
const OFFSET_OK = /(Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$/;
/** An ISO 8601 timestamp with a zone, as milliseconds. */
export const isoParam = z
  .string()
  .regex(ISO, 'must be an ISO 8601 timestamp such as 2026-11-22T10:00:00Z')
  .refine((s) => OFFSET_OK.test(s), 'has a UTC offset out of range: hours at most 23, minutes at most 59')
  .refine(isRealDate, 'is not a real date (no such day or time)')
  .transform((s, ctx) => {
    const t = Date.parse(s.replace(/(\.\d{3})\d+/, '$1'));
    if (!Number.isFinite(t)) {
      ctx.addIssue({ code: 'custom', message: 'is not a time this API can read', input: s });
      return z.NEVER;
    }
    return t;
  })
  .meta({
    format: 'date-time',
    description:
      'ISO 8601 with a zone (Z or ±hh:mm); fractions past milliseconds are cut; a day or time that does not exist is refused',
  });

export const listWakesQuery = z.strictObject({
  environment: environmentParam,
  since: isoParam.optional(),
  until: isoParam.optional(),
  method: z
    .string()
    .regex(/^[A-Za-z]{1,16}$/, 'must be an HTTP method such as GET')
    .transform((m) => m.toUpperCase())
    .optional(),
  route: z.string().min(1).max(64).optional(),
  /** `exclude` leaves out the gateway's own traffic (the /v2 API's calls, the console): routes v2 and console. */
  management: z.enum(['include', 'exclude']).optional(),
  status: intParam(100, 599).optional(),
  status_class: z.enum(['1xx', '2xx', '3xx', '4xx', '5xx']).optional(),
  path: z
    .string()
    .min(1)
    .max(1024)
    .meta({ pattern: '^/', description: 'a template: {name} matches one segment, a trailing * any rest' })
    .optional(),
  consumer: z.string().min(1).max(256).optional(),
  key_id: z.string().min(1).max(64).optional(),
  /** The wakes of one trace (W3C Trace Context); upper-case hex is read as lower. */
  trace_id: z
    .string()
    .regex(/^[0-9a-fA-F]{32}$/, 'must be a trace id: 32 hex digits such as 4bf92f3577b34da6a3ce929d0e0e4736')
    // All zeros is no trace (W3C Trace Context): no wake stores it.
    .refine((t) => !/^0{32}$/.test(t), 'is all zeros, which W3C Trace Context says is no trace id')
    .transform((t) => t.toLowerCase())
    .optional(),
  min_latency_ms: intParam(0, 2_147_483_647).optional(),
  limit: intParam(1, 100).optional(),
  cursor: z.string().min(1).max(512).optional(),
});

/** What docs/api.md says of the list beyond its summary: time formats and cursors. */
const LIST_WAKES_DESCRIPTION = [
  "`since` and `until` (here and on `GET /v2/stats`) are ISO 8601 with a zone: `2026-11-22T10:00:00Z`, `2026-11-22T10:00:00.123456+01:00` (digits past milliseconds are cut, so Python's `isoformat()` of an aware datetime is read as it is). An offset is at most ±23:59; a day, time or offset that does not exist is 400 naming the parameter.",
  '',
  '`next_cursor`, here and in every list, is opaque and signed by this installation: send it back unchanged, with the same filters. A cursor altered, made by a client, or issued before the gateway was upgraded is 400 `invalid_request` with `param: "cursor"`: list again from the first page.',
].join('\n');

export const wakeIdParams = z.strictObject({ wake_id: z.string().max(64) });
export const byIdQuery = z.strictObject({ environment: environmentParam });

export function wakesPlugin(app: FastifyInstance, deps: ApiDeps): void {
  app.get(
    '/v2/wakes',
    {
      config: {
        auth: { scope: 'wakes:read' },
        doc: {
          summary: 'List wakes, newest first, with filters and cursor pagination',
          description: LIST_WAKES_DESCRIPTION,
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
      const env = actingEnvironment(deps, request, q.environment);
      const filter: WakeFilter = { environment: env };
      if (q.since !== undefined) filter.since = q.since;
      if (q.until !== undefined) filter.until = q.until;
      if (q.since !== undefined && q.until !== undefined && q.since > q.until) {
        throw new GatewayError('invalid_request', 'until: must not be before since', 'until');
      }
      if (q.method !== undefined) filter.method = q.method;
      if (q.route !== undefined) filter.route = q.route;
      if (q.management === 'exclude') filter.excludeRoutes = MANAGEMENT_ROUTES;
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
      // Consumer names are compared after NFC (DESIGN.md), as the key list's filter is.
      if (q.consumer !== undefined) filter.consumer = q.consumer.normalize('NFC');
      if (q.key_id !== undefined) filter.keyId = q.key_id;
      if (q.trace_id !== undefined) filter.traceId = q.trace_id;
      if (q.min_latency_ms !== undefined) filter.minLatencyMs = q.min_latency_ms;
      const limit = q.limit ?? 20;
      const fp = filterFingerprint({ what: 'wakes', ...filter, pathPattern: q.path });
      const after = q.cursor !== undefined ? deps.cursors.decode(q.cursor, fp) : null;
      const page = await deps.wakes.list(filter, limit, after, deps.clock.now());
      const last = page.rows[page.rows.length - 1];
      const next = page.hasMore && last ? deps.cursors.encode({ t: last.captured_at, id: last.id }, fp) : null;
      return listEnvelope(page.rows.map(wakeView), page.hasMore, next);
    },
  );

  app.get(
    '/v2/wakes/:wake_id',
    {
      config: {
        auth: { scope: 'wakes:read' },
        doc: {
          summary: 'Read one wake with its exchange (request and response are null when it kept no detail)',
          query: byIdQuery,
          success: 200,
          object: 'wake',
          errors: [401, 403, 404],
        },
      },
    },
    async (request) => {
      const { wake_id } = parseInput(wakeIdParams, request.params, 'query');
      const { environment } = parseInput(byIdQuery, request.query, 'query');
      const env = actingEnvironment(deps, request, environment);
      const t = wake_id.startsWith('wk_') ? idTime(wake_id) : null;
      if (t === null) throw missing('wake', 'wake_id');
      const w = await deps.wakes.get(env, wake_id, t);
      if (!w) throw missing('wake', 'wake_id');
      return wakeDetailView(w, await deps.wakes.detail(env, wake_id, t));
    },
  );
}
