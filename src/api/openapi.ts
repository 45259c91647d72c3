import net from 'node:net';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ERROR_TYPES } from '../errors.js';
import type { ApiDeps, OpenApiServer } from './context.js';
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
 * call may get (400 for a malformed query, body or path, or a query parameter or body
 * field it does not take; 413 for a body past server.api_body_limit_bytes, which the
 * edge refuses whatever the method; with a key, 401, 403 and 429), an id in the path
 * (404), and `environment` naming one (404, 422).
 */
function statusesOf(d: RouteDoc, hasEnvironment: boolean): number[] {
  const s = new Set(d.errors);
  // An operation that takes no query parameters (or no body) refuses one sent: 400 too.
  s.add(400);
  // A body past server.api_body_limit_bytes, sent with any call (a GET's included).
  s.add(413);
  if (d.scope !== null) for (const c of [401, 403, 429]) s.add(c);
  if (d.url.includes(':')) s.add(404);
  if (hasEnvironment) for (const c of [404, 422]) s.add(c);
  s.delete(d.success);
  return [...s].sort((a, b) => a - b);
}

/** A listener as `/v2/openapi.json` names it: its name, whether it speaks TLS, and its configured host and bound port. */
export interface ListenerAddress {
  readonly name: 'main' | 'ops' | 'management';
  readonly tls: boolean;
  readonly host: string;
  readonly port: number;
}

/** 0.0.0.0, ::, or no host: every address of the machine, none of which names it. */
function anyAddress(host: string): boolean {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return h === '' || h === '0.0.0.0' || (net.isIPv6(h) && /^[0:]+$/.test(h));
}

/**
 * The server a `/v2/openapi.json` names (DESIGN: "names the server it was served
 * from"): the listener the request came on, at its configured address (`http` or
 * `https` by its TLS, the host it is bound to, the port it listens on). No request
 * header is ever written into it (Host, X-Forwarded-Host): the document names the
 * gateway's own listener, never what a client says. Where the listener's address
 * names nothing a client could call (bound to every address, 0.0.0.0 or ::), or the
 * request came through a trusted proxy (`server.trusted_proxies`, whose public address
 * the gateway does not know), the URL is `/`: relative, the address the document was
 * fetched from (OpenAPI 3.1, Server Object), which is the one that client can reach.
 */
export function listenerServer(l: ListenerAddress, viaProxy: boolean): OpenApiServer {
  const name = `the ${l.name} listener`;
  if (viaProxy)
    return { url: '/', description: `${name}, through a trusted proxy: the address this document was fetched from` };
  if (anyAddress(l.host))
    return {
      url: '/',
      description: `${name} (every address, port ${l.port}): the address this document was fetched from`,
    };
  const host = net.isIPv6(l.host) ? `[${l.host}]` : l.host;
  try {
    return { url: new URL(`${l.tls ? 'https' : 'http'}://${host}:${l.port}`).origin, description: name };
  } catch {
    return { url: '/', description: `${name}: the address this document was fetched from` };
  }
}

/** OpenAPI 3.1 for the /v2 API, built from the same zod schemas that validate requests. */
export function buildOpenApi(docs: readonly RouteDoc[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const d of docs) {
    if (d.unlisted) continue;
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

/**
 * `GET /v2/openapi.json`: the document, naming the server it was served from
 * (`servedFrom`, the listener the call came on). One document is kept per server named
 * (a listener has one or two: directly, and through a trusted proxy), built once.
 */
export function openapiPlugin(docs: readonly RouteDoc[]) {
  return (app: FastifyInstance, deps: ApiDeps): void => {
    let base: Record<string, unknown> | null = null;
    const cached = new Map<string, Record<string, unknown>>();
    // It takes no query parameters (an unknown one is 400, as on every /v2 call), and is
    // served at a path its document does not list.
    const config = {
      auth: { scope: null },
      doc: { summary: 'This OpenAPI 3.1 document', success: 200, errors: [400], unlisted: true },
    };
    app.get('/v2/openapi.json', { config }, async (request) => {
      const server = deps.servedFrom?.(request.raw) ?? null;
      const key = server === null ? '' : `${server.url} ${server.description}`;
      let doc = cached.get(key);
      if (doc === undefined) {
        // The operations once; each server's document shares them.
        base ??= buildOpenApi(docs);
        const { openapi, info, ...rest } = base;
        doc = { openapi, info, ...(server === null ? {} : { servers: [server] }), ...rest };
        // A bound that cannot bite (servers come from the config's listeners), kept anyway.
        if (cached.size < 16) cached.set(key, doc);
      }
      return doc;
    });
  };
}
