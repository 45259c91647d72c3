import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { GatewayError, missing } from '../errors.js';
import { EVENT_TYPES } from '../events/bus.js';
import type { DeliveryTable } from '../store/webhooks.js';
import { type Dispatcher, ENDPOINT_DELETED } from '../webhooks/dispatcher.js';
import { type EndpointService, endpointView } from '../webhooks/endpoints.js';
import type { DeliveryRecord } from '../webhooks/records.js';
import { redeliver } from '../webhooks/redeliver.js';
import { TEST_EVENT, testDelivery } from '../webhooks/test-delivery.js';
import type { ApiDeps } from './context.js';
import { filterFingerprint } from './cursor.js';
import { actingEnvironment, environmentParam } from './env.js';
import { intParam, parseInput } from './parse.js';
import { iso, listEnvelope } from './views.js';

export interface WebhookApiDeps {
  endpoints: EndpointService;
  deliveries: DeliveryTable;
  dispatcher: Dispatcher;
}

/** Subscribed event types: at least one, each once, or "*" alone (every type). */
const EVENTS = z
  .array(z.string().min(1).max(64))
  .max(50)
  .meta({ minItems: 1, uniqueItems: true, description: 'event types, or ["*"] alone for every type' });

export const createEndpointBody = z.strictObject({
  url: z.string().min(1).max(2048),
  events: EVENTS,
  environment: environmentParam,
});
export const listEndpointsQuery = z.strictObject({
  environment: environmentParam,
  limit: intParam(1, 100).optional(),
  cursor: z.string().min(1).max(512).optional(),
});
export const listDeliveriesQuery = z.strictObject({
  environment: environmentParam,
  endpoint_id: z.string().min(1).max(64).optional(),
  status: z.enum(['pending', 'delivered', 'failed', 'dead_lettered']).optional(),
  event_type: z.enum([...EVENT_TYPES, TEST_EVENT]).optional(),
  limit: intParam(1, 100).optional(),
  cursor: z.string().min(1).max(512).optional(),
});
export const patchEndpointBody = z.strictObject({
  events: EVENTS.optional(),
  status: z.enum(['enabled', 'disabled']).optional(),
});
const deliveryIdParams = z.strictObject({ delivery_id: z.string().max(64) });
const endpointIdParams = z.strictObject({ endpoint_id: z.string().max(64) });
const byIdQuery = z.strictObject({ environment: environmentParam });

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
            // 503: the url's host did not resolve within its bound (the check against private addresses).
            errors: [400, 401, 403, 422, 429, 503],
          },
        },
      },
      async (request, reply) => {
        const { environment, ...body } = parseInput(createEndpointBody, request.body, 'body');
        const e = await w.endpoints.create(body, actingEnvironment(deps, request, environment));
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
        const env = actingEnvironment(deps, request, q.environment);
        const fp = filterFingerprint({ env, what: 'endpoints' });
        const after = q.cursor ? deps.cursors.decode(q.cursor, fp).id : null;
        const all = w.endpoints.list(env).filter((e) => after === null || e.id > after);
        const limit = q.limit ?? 20;
        const page = all.slice(0, limit);
        const last = page[page.length - 1];
        const more = all.length > limit;
        return listEnvelope(
          page.map((e) => endpointView(e)),
          more,
          more && last ? deps.cursors.encode({ t: 0, id: last.id }, fp) : null,
        );
      },
    );

    app.get(
      '/v2/webhooks/deliveries',
      {
        config: {
          auth: { scope: 'webhooks:read' },
          doc: {
            summary:
              'List deliveries, newest first; endpoint_id may name a deleted endpoint (its deliveries stay listed)',
            query: listDeliveriesQuery,
            success: 200,
            object: 'list of delivery',
            errors: [400, 401, 403, 404],
          },
        },
      },
      async (request) => {
        const q = parseInput(listDeliveriesQuery, request.query, 'query');
        const env = actingEnvironment(deps, request, q.environment);
        // A deleted endpoint's deliveries (dead-lettered, `endpoint deleted`) stay listed by its id.
        if (q.endpoint_id !== undefined) w.endpoints.everInEnvironment(q.endpoint_id, env);
        const filter = {
          environment: env,
          ...(q.endpoint_id !== undefined ? { endpointId: q.endpoint_id } : {}),
          ...(q.status !== undefined ? { status: q.status } : {}),
          ...(q.event_type !== undefined ? { eventType: q.event_type } : {}),
        };
        const fp = filterFingerprint({ what: 'deliveries', ...filter });
        const before = q.cursor ? deps.cursors.decode(q.cursor, fp).id : null;
        const limit = q.limit ?? 20;
        const page = await w.deliveries.list(filter, limit, before);
        const last = page.rows[page.rows.length - 1];
        return listEnvelope(
          page.rows.map(deliveryView),
          page.hasMore,
          page.hasMore && last ? deps.cursors.encode({ t: 0, id: last.id }, fp) : null,
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
            query: byIdQuery,
            success: 201,
            object: 'delivery',
            errors: [401, 403, 404, 409, 503],
          },
        },
      },
      async (request, reply) => {
        const { delivery_id } = parseInput(deliveryIdParams, request.params, 'query');
        const { environment } = parseInput(byIdQuery, request.query, 'query');
        const env = actingEnvironment(deps, request, environment);
        const r = await redeliver({
          deliveries: w.deliveries,
          endpoints: w.endpoints,
          dispatcher: w.dispatcher,
          clock: deps.clock,
          environment: env,
          id: delivery_id,
        });
        reply.code(201);
        return deliveryView(r);
      },
    );

    app.get(
      '/v2/webhooks/deliveries/:delivery_id',
      {
        config: {
          auth: { scope: 'webhooks:read' },
          doc: {
            summary: 'Read a delivery, with every attempt and the payload',
            query: byIdQuery,
            success: 200,
            object: 'delivery',
            errors: [400, 401, 403, 404],
          },
        },
      },
      async (request) => {
        const { delivery_id } = parseInput(deliveryIdParams, request.params, 'query');
        const { environment } = parseInput(byIdQuery, request.query, 'query');
        const env = actingEnvironment(deps, request, environment);
        const d = delivery_id.startsWith('dlv_') ? await w.deliveries.get(env, delivery_id) : null;
        if (!d) throw missing('delivery', 'delivery_id');
        const attempts = await w.deliveries.attempts(env, d.id);
        return {
          ...deliveryView(d),
          attempts: attempts.map((a) => ({
            attempt: a.attempt,
            at: iso(a.at),
            response_status: a.response_status === 0 ? null : a.response_status,
            duration_ms: a.duration_ms,
            error: a.error,
            response_body: a.response_body,
          })),
        };
      },
    );

    const endpointRoute = (
      method: 'GET' | 'PATCH' | 'DELETE' | 'POST',
      url: string,
      scope: string,
      summary: string,
      run: (id: string, env: string, body: unknown) => Promise<{ code: number; body: unknown }>,
      body?: z.ZodType,
    ) =>
      app.route({
        method,
        url,
        config: {
          auth: { scope },
          doc: {
            summary,
            query: byIdQuery,
            ...(body ? { body } : {}),
            success: method === 'POST' && url.endsWith('/test') ? 201 : 200,
            object: url.endsWith('/test') ? 'delivery' : 'webhook_endpoint',
            // A test send is refused (503) while the queue is full (webhooks.max_queued_events).
            errors: url.endsWith('/test') ? [400, 401, 403, 404, 409, 422, 503] : [400, 401, 403, 404, 422],
          },
        },
        handler: async (request, reply) => {
          const { endpoint_id } = parseInput(endpointIdParams, request.params, 'query');
          const { environment } = parseInput(byIdQuery, request.query, 'query');
          const env = actingEnvironment(deps, request, environment);
          const r = await run(endpoint_id, env, request.body);
          reply.code(r.code);
          if (method === 'POST' && url.endsWith('rotate-secret')) reply.header('cache-control', 'no-store');
          return r.body;
        },
      });

    endpointRoute(
      'GET',
      '/v2/webhooks/endpoints/:endpoint_id',
      'webhooks:read',
      'Read an endpoint',
      async (id, env) => ({
        code: 200,
        body: endpointView(w.endpoints.inEnvironment(id, env)),
      }),
    );
    endpointRoute(
      'PATCH',
      '/v2/webhooks/endpoints/:endpoint_id',
      'webhooks:write',
      'Change events, or status (enabled | disabled; re-enabling clears the run of 410 answers)',
      async (id, env, raw) => {
        const patch = parseInput(patchEndpointBody, raw, 'body');
        const e = await w.endpoints.update(id, env, {
          ...(patch.events !== undefined ? { events: patch.events } : {}),
          ...(patch.status !== undefined ? { status: patch.status } : {}),
        });
        return { code: 200, body: endpointView(e) };
      },
      patchEndpointBody,
    );
    endpointRoute(
      'DELETE',
      '/v2/webhooks/endpoints/:endpoint_id',
      'webhooks:write',
      'Delete an endpoint; its pending deliveries are cancelled',
      async (id, env) => {
        const e = await w.endpoints.remove(id, env);
        w.dispatcher.cancel(id, ENDPOINT_DELETED);
        return { code: 200, body: endpointView(e) };
      },
    );
    endpointRoute(
      'POST',
      '/v2/webhooks/endpoints/:endpoint_id/rotate-secret',
      'webhooks:write',
      'A new signing secret, in this response only; the old one keeps signing alongside for 24 hours',
      async (id, env) => ({ code: 200, body: endpointView(await w.endpoints.rotateSecret(id, env), true) }),
    );
    endpointRoute(
      'POST',
      '/v2/webhooks/endpoints/:endpoint_id/test',
      'webhooks:write',
      'Send a webhook.test event to this endpoint only',
      async (id, env) => {
        const e = w.endpoints.inEnvironment(id, env);
        // It would be dead-lettered unsent (a disabled endpoint takes no deliveries): said now instead.
        if (e.status !== 'enabled')
          throw new GatewayError(
            'conflict',
            'this endpoint is disabled; enable it (PATCH status: enabled) to send it a test',
            'endpoint_id',
          );
        const d = await testDelivery({
          dispatcher: w.dispatcher,
          clock: deps.clock,
          endpoint: e,
          maxAttempts: deps.config.webhooks.retry_schedule_s.length + 1,
        });
        return { code: 201, body: deliveryView(d) };
      },
    );
  };
}
