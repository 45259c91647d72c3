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
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, {
    io: 'input',
    unrepresentable: 'any',
    // A whole number sent as query text is documented as an integer (its range in its metadata), not a pattern.
    override: (ctx) => {
      const j = ctx.jsonSchema as Record<string, unknown>;
      if (j.type === 'integer') delete j.pattern;
    },
  }) as Record<string, unknown>;
  return rest;
};

/**
 * The statuses an operation can answer, beyond what its route declares: what every
 * call may get (400 for a malformed query, body or path; with a key, 401, 403 and
 * 429), an id in the path (404), and `environment` naming one (404, 422).
 */
function statusesOf(d: RouteDoc, hasEnvironment: boolean): number[] {
  const s = new Set(d.errors);
  if (d.query || d.body || d.url.includes(':')) s.add(400);
  // A body past server.api_body_limit_bytes.
  if (d.body) s.add(413);
  if (d.scope !== null) for (const c of [401, 403, 429]) s.add(c);
  if (d.url.includes(':')) s.add(404);
  if (hasEnvironment) for (const c of [404, 422]) s.add(c);
  s.delete(d.success);
  return [...s].sort((a, b) => a - b);
}

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
    let hasEnvironment = false;
    if (d.query) {
      const js = jsonSchema(d.query) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, schema] of Object.entries(js.properties ?? {})) {
        if (name === 'environment') hasEnvironment = true;
        params.push({ name, in: 'query', required: js.required?.includes(name) ?? false, schema });
      }
    }
    const responses: Record<string, unknown> = {
      [String(d.success)]: {
        description: d.object ?? 'success',
        content: { 'application/json': { schema: { type: 'object' } } },
      },
    };
    for (const code of statusesOf(d, hasEnvironment)) {
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
      ...(d.description ? { description: d.description } : {}),
      operationId: `${d.method.toLowerCase()}${path.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      parameters: params,
      responses,
      // A scope of '' is any valid key: a key is still needed.
      ...(d.scope !== null
        ? { security: [{ bearer: [] }], ...(d.scope ? { 'x-required-scope': d.scope } : {}) }
        : { security: [] }),
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
