import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { DeliveryRecord, DeliveryTable } from '../store/webhooks.js';
import type { Dispatcher } from '../webhooks/dispatcher.js';
import { type EndpointService, endpointView } from '../webhooks/endpoints.js';
import { replayDelivery } from '../webhooks/replay.js';
import type { ApiDeps } from './context.js';
import { decodeCursor, encodeCursor, filterFingerprint } from './cursor.js';
import { intParam, parseInput } from './parse.js';
import { iso, listEnvelope } from './views.js';

export interface WebhookApiDeps {
  endpoints: EndpointService;
  deliveries: DeliveryTable;
  dispatcher: Dispatcher;
}

export const createEndpointBody = z.strictObject({
  url: z.string().min(1).max(2048),
  events: z.array(z.string().min(1).max(64)).max(50),
});
export const listEndpointsQuery = z.strictObject({
  limit: intParam(1, 100).optional(),
  cursor: z.string().max(512).optional(),
});
export const listDeliveriesQuery = z.strictObject({
  endpoint_id: z.string().min(1).max(64).optional(),
  status: z.enum(['pending', 'delivered', 'failed', 'dead_lettered']).optional(),
  event_type: z.string().min(1).max(64).optional(),
  limit: intParam(1, 100).optional(),
  cursor: z.string().max(512).optional(),
});
const deliveryIdParams = z.strictObject({ delivery_id: z.string().max(64) });

export function deliveryView(d: DeliveryRecord) {
  return {
    id: d.id,
    object: 'delivery' as const,
    endpoint_id: d.endpoint_id,
    event_id: d.event_id,
    event_type: d.event_type,
    attempt: d.attempt,
    max_attempts: d.max_attempts,
    status: d.status,
    response_status: d.response_status === 0 ? null : d.response_status,
    response_body: d.response_body,
    duration_ms: d.duration_ms,
    is_replay: d.is_replay,
    replay_of: d.replay_of,
    created_at: iso(d.created_at),
    next_attempt_at: d.next_attempt_at === null ? null : iso(d.next_attempt_at),
    payload: JSON.parse(d.payload) as unknown,
  };
}

/** /v2/webhooks: endpoints, deliveries and replays. */
export function webhooksPlugin(w: WebhookApiDeps) {
  return (app: FastifyInstance, deps: ApiDeps): void => {
    app.post(
      '/v2/webhooks/endpoints',
      {
        config: {
          auth: { scope: 'webhooks:write', policy: 'webhook_registration' },
          doc: {
            summary: 'Register an endpoint; its whsec_ signing secret is in this response only',
            body: createEndpointBody,
            success: 201,
            object: 'webhook_endpoint',
            errors: [400, 401, 403, 422, 429],
          },
        },
      },
      async (request, reply) => {
        const body = parseInput(createEndpointBody, request.body, 'body');
        const e = await w.endpoints.create(body, request.key.environment);
        reply.code(201).header('cache-control', 'no-store');
        return endpointView(e, true);
      },
    );

    app.get(
      '/v2/webhooks/endpoints',
      {
        config: {
          auth: { scope: 'webhooks:read' },
          doc: {
            summary: 'List endpoints',
            query: listEndpointsQuery,
            success: 200,
            object: 'list of webhook_endpoint',
            errors: [400, 401, 403],
          },
        },
      },
      async (request) => {
        const q = parseInput(listEndpointsQuery, request.query, 'query');
        const fp = filterFingerprint({ env: request.key.environment, what: 'endpoints' });
        const after = q.cursor ? decodeCursor(q.cursor, fp).id : null;
        const all = w.endpoints.list(request.key.environment).filter((e) => after === null || e.id > after);
        const limit = q.limit ?? 20;
        const page = all.slice(0, limit);
        const last = page[page.length - 1];
        const more = all.length > limit;
        return listEnvelope(
          page.map((e) => endpointView(e)),
          more,
          more && last ? encodeCursor({ t: 0, id: last.id }, fp) : null,
        );
      },
    );

    app.get(
      '/v2/webhooks/deliveries',
      {
        config: {
          auth: { scope: 'webhooks:read' },
          doc: {
            summary: 'List deliveries, newest first',
            query: listDeliveriesQuery,
            success: 200,
            object: 'list of delivery',
            errors: [400, 401, 403, 404],
          },
        },
      },
      async (request) => {
        const q = parseInput(listDeliveriesQuery, request.query, 'query');
        const env = request.key.environment;
        if (q.endpoint_id !== undefined) w.endpoints.inEnvironment(q.endpoint_id, env);
        const filter = {
          environment: env,
          ...(q.endpoint_id !== undefined ? { endpointId: q.endpoint_id } : {}),
          ...(q.status !== undefined ? { status: q.status } : {}),
          ...(q.event_type !== undefined ? { eventType: q.event_type } : {}),
        };
        const fp = filterFingerprint(filter);
        const before = q.cursor ? decodeCursor(q.cursor, fp).id : null;
        const limit = q.limit ?? 20;
        const page = await w.deliveries.list(filter, limit, before);
        const last = page.rows[page.rows.length - 1];
        return listEnvelope(
          page.rows.map(deliveryView),
          page.hasMore,
          page.hasMore && last ? encodeCursor({ t: 0, id: last.id }, fp) : null,
        );
      },
    );

    app.post(
      '/v2/webhooks/deliveries/:delivery_id/replay',
      {
        config: {
          auth: { scope: 'webhooks:write' },
          doc: {
            summary: 'Replay a failed or dead-lettered delivery as a new, marked delivery',
            success: 201,
            object: 'delivery',
            errors: [401, 403, 404, 409],
          },
        },
      },
      async (request, reply) => {
        const { delivery_id } = parseInput(deliveryIdParams, request.params, 'query');
        const r = await replayDelivery(w.deliveries, w.dispatcher, deps.clock, request.key.environment, delivery_id);
        reply.code(201);
        return deliveryView(r);
      },
    );
  };
}
