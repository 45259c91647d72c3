import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { missing } from '../errors.js';
import type { ApiDeps } from './context.js';
import { parseInput } from './parse.js';

export const createKeyBody = z.strictObject({
  label: z.string().min(1).max(200),
  environment: z.string().min(1).max(64),
  scopes: z.array(z.string().min(1).max(128)).max(100),
  consumer: z.string().min(1).max(256).optional(),
  rate_limit: z
    .strictObject({
      limit: z.number().int().positive().max(1e9),
      burst: z.number().int().positive().max(1e9),
      window: z.enum(['second', 'minute', 'hour', 'day']),
    })
    .optional(),
  replaces: z.string().min(1).max(64).optional(),
});

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;
export const revokeKeyBody = z.strictObject({
  revoke_at: z
    .string()
    .regex(ISO_UTC, 'must be an ISO 8601 UTC timestamp such as 2026-12-01T00:00:00.000Z')
    .refine((s) => !Number.isNaN(Date.parse(s)), 'is not a real date')
    .optional(),
});
export const keyIdParams = z.strictObject({ key_id: z.string().max(64) });

export function keysPlugin(app: FastifyInstance, deps: ApiDeps): void {
  app.post(
    '/v2/api-keys',
    {
      config: {
        auth: { scope: 'keys:write' },
        doc: {
          summary: 'Issue a key; its secret is in this response only',
          body: createKeyBody,
          success: 201,
          object: 'api_key',
          errors: [400, 401, 403, 404, 422, 429],
        },
      },
    },
    async (request, reply) => {
      const body = parseInput(createKeyBody, request.body, 'body');
      const { key, secret } = await deps.keys.create(body, request.key.environment, request.key.scopes);
      reply.code(201).header('cache-control', 'no-store');
      return deps.keys.view(key, secret);
    },
  );

  app.get(
    '/v2/api-keys/:key_id',
    {
      config: {
        auth: { scope: 'keys:read' },
        doc: {
          summary: 'Read a key, with last_used_at to the second',
          success: 200,
          object: 'api_key',
          errors: [401, 403, 404],
        },
      },
    },
    async (request) => {
      const { key_id } = parseInput(keyIdParams, request.params, 'query');
      const k = deps.keys.get(key_id, request.key.environment);
      const view = deps.keys.view(k);
      if (view.last_used_at === null) {
        const t = await deps.keys.lastUsed(k);
        if (t !== null) view.last_used_at = new Date(t).toISOString();
      }
      return view;
    },
  );

  app.delete(
    '/v2/api-keys/:key_id',
    {
      config: {
        auth: { scope: 'keys:write' },
        doc: {
          summary: 'Revoke a key now, or at revoke_at; cannot be undone',
          body: revokeKeyBody,
          success: 200,
          object: 'api_key',
          errors: [400, 401, 403, 404, 422],
        },
      },
    },
    async (request) => {
      const { key_id } = parseInput(keyIdParams, request.params, 'query');
      const body = parseInput(revokeKeyBody, request.body, 'body');
      if (!key_id.startsWith('key_')) throw missing('key');
      const at = body.revoke_at !== undefined ? Date.parse(body.revoke_at) : undefined;
      const k = await deps.keys.revoke(key_id, request.key.environment, at);
      return deps.keys.view(k);
    },
  );
}
