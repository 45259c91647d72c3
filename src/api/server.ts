import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { authenticate, hasScope, scopeError } from '../auth/authorize.js';
import { EXCHANGE, PEER, type WithExchange, type WithPeer } from '../capture/recorder.js';
import { errorBody, GatewayError } from '../errors.js';
import type { ApiDeps } from './context.js';
import type { RouteDoc } from './docs.js';
import { environmentsPlugin } from './environments.js';
import { keysPlugin } from './keys.js';
import { openapiPlugin } from './openapi.js';
import { statsPlugin } from './stats.js';
import { wakesPlugin } from './wakes.js';

/** The methods /v2's router knows; any other is answered 405 before fastify reads a body. */
const STANDARD_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export type ApiPlugin = (app: FastifyInstance, deps: ApiDeps) => Promise<void> | void;

/** Maps every error to DESIGN.md's body; unknown errors become 500 internal_error. */
function toGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  if (!(err instanceof Error)) return new GatewayError('internal_error');
  const code = (err as FastifyError).code;
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new GatewayError('payload_too_large', 'the request body is larger than the limit');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new GatewayError(
        'invalid_request',
        'bodies must be sent as Content-Type: application/json',
        'content-type',
      );
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new GatewayError('invalid_request', 'the body is empty; send a JSON object', 'body');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new GatewayError('invalid_request', 'Content-Length does not match the body', 'content-length');
    case 'FST_ERR_CTP_INVALID_TYPE':
      return new GatewayError('invalid_request', 'the Content-Type header is not valid', 'content-type');
  }
  const status = (err as FastifyError).statusCode;
  if (status && status >= 400 && status < 500) return new GatewayError('invalid_request', err.message);
  return new GatewayError('internal_error');
}

/**
 * Builds the /v2 management API. The gateway owns the HTTP server; `handler` is
 * what the gateway's listener calls for /v2 management paths.
 */
export async function buildApi(
  deps: ApiDeps,
  server: Server,
  plugins: ApiPlugin[] = [],
): Promise<{ app: FastifyInstance; handler: (req: IncomingMessage, res: ServerResponse) => void }> {
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | null = null;
  const app = Fastify({
    logger: false,
    bodyLimit: deps.config.server.api_body_limit_bytes,
    serverFactory: (h) => {
      handler = h;
      return server;
    },
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200 },
    return503OnClosing: true,
    // The router's own refusals (a path segment too long, a malformed escape) get the
    // same body as every other error, and the key is checked first, as for any call.
    frameworkErrors: (err, request, reply) => {
      const wakeId = (request.raw as WithExchange)[EXCHANGE]?.id ?? null;
      const a = authenticate(deps.ring, request.headers.authorization, deps.clock.now());
      const g =
        a.error ??
        new GatewayError(
          'invalid_request',
          err.code === 'FST_ERR_MAX_PARAM_LENGTH'
            ? 'a path segment is longer than 200 characters: no id is that long'
            : 'the path is not valid: a percent-escape is malformed',
          'path',
        );
      const res = reply.raw;
      const body = JSON.stringify(errorBody(g.type, wakeId, g.message, g.param));
      res.writeHead(g.status, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
        ...(g.status === 401 ? { 'www-authenticate': 'Bearer' } : {}),
      });
      res.end(body);
    },
  });

  // JSON only; invalid UTF-8 is refused rather than silently replaced.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body: Buffer, done) => {
    if (!isUtf8(body)) {
      done(new GatewayError('invalid_request', 'the body is not valid UTF-8', 'body'), undefined);
      return;
    }
    if (body.length === 0) {
      done(null, undefined);
      return;
    }
    try {
      done(null, JSON.parse(body.toString('utf8')));
    } catch (e) {
      done(
        new GatewayError('invalid_request', `the body is not valid JSON: ${(e as Error).message}`, 'body'),
        undefined,
      );
    }
  });

  app.setErrorHandler((err, request, reply) => {
    const g = toGatewayError(err);
    if (g.type === 'internal_error') deps.log.error('unhandled API error', { err, url: request.url });
    const wakeId = (request.raw as WithExchange)[EXCHANGE]?.id ?? null;
    if (g.status === 401) reply.header('www-authenticate', 'Bearer');
    if (g.retryAfter !== null) reply.header('retry-after', String(g.retryAfter));
    reply
      .code(g.status)
      .type('application/json; charset=utf-8')
      .send(errorBody(g.type, wakeId, g.message, g.param, g.retryAfter));
  });

  // Known paths, so a wrong method is 405 with Allow rather than 404.
  const known: { re: RegExp; methods: Set<string> }[] = [];
  app.setNotFoundHandler((request, reply) => {
    const wakeId = (request.raw as WithExchange)[EXCHANGE]?.id ?? null;
    const path = request.url.split('?')[0] as string;
    const allowed = new Set<string>();
    for (const k of known) if (k.re.test(path)) for (const m of k.methods) allowed.add(m);
    if (allowed.size > 0) {
      const allow = [...allowed].sort().join(', ');
      return reply
        .code(405)
        .header('allow', allow)
        .send(errorBody('invalid_request', wakeId, `${request.method} is not allowed here; use ${allow}`, 'method'));
    }
    reply
      .code(404)
      .send(errorBody('resource_missing', wakeId, `no such endpoint: ${request.method} ${request.url.split('?')[0]}`));
  });

  const UNCOORDINATED = 'rate limits cannot be checked: the coordination server does not answer';
  app.decorateRequest('key', null as never);
  app.addHook('onRequest', async (request, reply) => {
    const auth = request.routeOptions.config.auth;
    if (!auth || auth.scope === null) return;
    const x = (request.raw as WithExchange)[EXCHANGE];
    const now = deps.clock.now();
    const a = authenticate(deps.ring, request.headers.authorization, now);
    if (a.error) {
      if (x && a.key) {
        x.key = a.key;
        x.consumer = a.key.consumer;
        x.environment = a.key.environment;
      }
      // Refused keys are limited per address, as at the proxy.
      const over = await deps.limiter?.refused((request.raw as WithPeer)[PEER] ?? request.ip, now);
      if (over?.unavailable) throw new GatewayError('service_unavailable', UNCOORDINATED, null, 1);
      if (over) {
        for (let i = 0; i < over.headers.length; i += 2) {
          if (over.headers[i] !== 'retry-after') reply.header(over.headers[i] as string, over.headers[i + 1]);
        }
        deps.metrics.rateLimited.labels(over.policy ?? 'unknown').inc();
        throw new GatewayError('rate_limit_exceeded', undefined, null, over.retryAfter);
      }
      throw a.error;
    }
    const key = a.key;
    if (x) {
      x.key = key;
      x.consumer = key.consumer;
      x.environment = key.environment;
    }
    deps.ring.touch(key.id, now);
    if (auth.scope !== '' && !hasScope(key, auth.scope)) throw scopeError(auth.scope);
    if (deps.limiter) {
      const d = await deps.limiter.check(key, (request.raw as WithPeer)[PEER] ?? request.ip, auth.policy ?? null, now);
      if (d.unavailable) throw new GatewayError('service_unavailable', UNCOORDINATED, null, 1);
      for (let i = 0; i < d.headers.length; i += 2) {
        if (d.headers[i] !== 'retry-after') reply.header(d.headers[i] as string, d.headers[i + 1]);
      }
      if (!d.allowed) {
        deps.metrics.rateLimited.labels(d.policy ?? 'unknown').inc();
        throw new GatewayError('rate_limit_exceeded', undefined, null, d.retryAfter);
      }
    }
    request.key = key;
  });

  const docs: RouteDoc[] = [];
  app.addHook('onRoute', (r) => {
    const pattern = `^${r.url.replace(/:[A-Za-z_]+/g, '[^/]+')}/?$`;
    let k = known.find((x) => x.re.source === new RegExp(pattern).source);
    if (!k) {
      k = { re: new RegExp(pattern), methods: new Set() };
      known.push(k);
    }
    for (const m of [r.method].flat()) k.methods.add(m);
    const doc = r.config?.doc;
    if (!doc) return;
    for (const method of [r.method].flat()) {
      if (method === 'HEAD') continue;
      docs.push({ ...doc, method, url: r.url, scope: r.config?.auth?.scope ?? null });
    }
  });
  await app.register(async (scoped) => {
    for (const p of [wakesPlugin, keysPlugin, statsPlugin, environmentsPlugin, ...plugins, openapiPlugin(docs)]) {
      await p(scoped, deps);
    }
  });
  await app.ready();
  const h = handler as ((req: IncomingMessage, res: ServerResponse) => void) | null;
  if (!h) throw new Error('fastify did not hand over its request handler');
  // A method no /v2 endpoint has (QUERY, PROPFIND, ...) is 405 with Allow, whatever its
  // Content-Type (fastify would parse the body of some first, and answer 400).
  const wrapped = (req: IncomingMessage, res: ServerResponse) => {
    if (STANDARD_METHODS.has(req.method ?? '')) return h(req, res);
    const path = (req.url ?? '').split('?')[0] as string;
    const allowed = new Set<string>();
    for (const k of known) if (k.re.test(path)) for (const m of k.methods) allowed.add(m);
    const allow = [...allowed].sort().join(', ');
    const wakeId = (req as WithExchange)[EXCHANGE]?.id ?? null;
    const body = JSON.stringify(
      allowed.size > 0
        ? errorBody('invalid_request', wakeId, `${req.method} is not allowed here; use ${allow}`, 'method')
        : errorBody('resource_missing', wakeId, `no such endpoint: ${req.method} ${path}`),
    );
    req.resume();
    res.writeHead(allowed.size > 0 ? 405 : 404, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      ...(allowed.size > 0 ? { allow } : {}),
    });
    res.end(body);
  };
  return { app, handler: wrapped };
}
