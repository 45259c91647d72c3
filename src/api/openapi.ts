import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ERROR_TYPES } from '../errors.js';
import type { RouteDoc } from './docs.js';

const errorSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['type', 'message', 'param', 'retry_after', 'wake_id'],
      properties: {
        type: { type: 'string', enum: Object.keys(ERROR_TYPES) },
        message: { type: 'string' },
        param: { type: ['string', 'null'] },
        retry_after: { type: ['integer', 'null'] },
        wake_id: { type: ['string', 'null'] },
      },
    },
  },
};

const jsonSchema = (s: z.ZodType) => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return rest;
};

/** OpenAPI 3.1 for the /v2 API, built from the same zod schemas that validate requests. */
export function buildOpenApi(docs: readonly RouteDoc[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const d of docs) {
    const path = d.url.replace(/:([A-Za-z_]+)/g, '{$1}');
    const params: unknown[] = [...d.url.matchAll(/:([A-Za-z_]+)/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
    }));
    if (d.query) {
      const js = jsonSchema(d.query) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, schema] of Object.entries(js.properties ?? {})) {
        params.push({ name, in: 'query', required: js.required?.includes(name) ?? false, schema });
      }
    }
    const responses: Record<string, unknown> = {
      [String(d.success)]: {
        description: d.object ?? 'success',
        content: { 'application/json': { schema: { type: 'object' } } },
      },
    };
    for (const code of d.errors) {
      responses[String(code)] = {
        description: Object.entries(ERROR_TYPES)
          .filter(([, v]) => v.status === code)
          .map(([k]) => k)
          .join(', '),
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
    }
    const op: Record<string, unknown> = {
      summary: d.summary,
      operationId: `${d.method.toLowerCase()}${path.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      parameters: params,
      responses,
      ...(d.scope ? { security: [{ bearer: [] }], 'x-required-scope': d.scope } : { security: [] }),
    };
    if (d.body) {
      op.requestBody = { required: true, content: { 'application/json': { schema: jsonSchema(d.body) } } };
    }
    paths[path] ??= {};
    (paths[path] as Record<string, unknown>)[d.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: { title: 'wakegate management API', version: '2' },
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: { Error: errorSchema },
    },
  };
}

export function openapiPlugin(docs: readonly RouteDoc[]) {
  return (app: FastifyInstance): void => {
    let cached: Record<string, unknown> | null = null;
    app.get('/v2/openapi.json', { config: { auth: { scope: null } } }, async () => {
      cached ??= buildOpenApi(docs);
      return cached;
    });
  };
}
