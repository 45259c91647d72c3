import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import { type Admitted, isRefusal } from '../admission/admission.js';
import { apiGate, type Gate, OPEN_CALL } from '../admission/gate.js';
import { type Refusal, refusal } from '../admission/refusal.js';
import { isRevoked } from '../auth/authorize.js';
import type { KeyRecord } from '../auth/key.js';
import { EXCHANGE, type WithExchange } from '../capture/recorder.js';
import { errorBody, GatewayError } from '../errors.js';
import { apiBodyLimits, BODY_REFUSED, bodyRefusal, type WithBodyRefused } from '../management-body.js';
import type { ApiDeps, RouteAuth } from './context.js';
import type { RouteDoc } from './docs.js';
import { environmentsPlugin } from './environments.js';
import { keysPlugin } from './keys.js';
import { KnownPaths } from './methods.js';
import { openapiPlugin } from './openapi.js';
import { parseInput } from './parse.js';
import { parseQuery, queryEncodingError } from './query.js';
import { statsPlugin } from './stats.js';
import { wakesPlugin } from './wakes.js';

/** The methods /v2's router knows; any other is answered 405 before fastify reads a body. */
/** What an operation that takes no query parameters (or no body) accepts: nothing. */
const NO_FIELDS = z.strictObject({});
const STANDARD_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export type ApiPlugin = (app: FastifyInstance, deps: ApiDeps) => Promise<void> | void;

/**
 * Maps every error to DESIGN.md's body; unknown errors become 500 internal_error. A body
 * past the limit is `tooLarge`: the words the main listener's edge uses (management-body.ts).
 */
function toGatewayError(err: unknown, tooLarge: GatewayError): GatewayError {
  if (err instanceof GatewayError) return err;
  if (!(err instanceof Error)) return new GatewayError('internal_error');
  const code = (err as FastifyError).code;
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return tooLarge;
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
 * The gate of a /v2 call no operation takes (the router refused its path, no operation
 * has its path or method): any live key.
 */
const ANY_KEY = apiGate('', null);
const KEY_REVOKED = new GatewayError('key_revoked');

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
    // A query value (or name) whose percent-escapes are not UTF-8 is refused, not read as
    // its literal text (fastify's default keeps it raw): see the preValidation hook below.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200, querystringParser: parseQuery },
    return503OnClosing: true,
    // The router's own refusals (a path segment too long, a malformed escape) get the
    // same body as every other error, and pass the one admission first as a call any
    // live key may make: a refused key (or an exhausted bucket) is told before the path.
    frameworkErrors: (err, request, reply) => {
      const x = (request.raw as WithExchange)[EXCHANGE] ?? null;
      const answer = (v: Admitted | Refusal) => {
        const g = isRefusal(v)
          ? v.error
          : new GatewayError(
              'invalid_request',
              err.code === 'FST_ERR_MAX_PARAM_LENGTH'
                ? 'a path segment is longer than 200 characters: no id is that long'
                : 'the path is not valid: a percent-escape is malformed',
              'path',
            );
        const headers = isRefusal(v) ? v.headers : v.limitHeaders;
        const res = reply.raw;
        if (headers !== null)
          for (let i = 0; i < headers.length; i += 2) res.setHeader(headers[i] as string, headers[i + 1] as string);
        const body = JSON.stringify(errorBody(g.type, x?.id ?? null, g.message, g.param));
        res.writeHead(g.status, {
          'content-type': 'application/json; charset=utf-8',
          'content-length': Buffer.byteLength(body),
        });
        res.end(body);
      };
      const v = deps.admission.call(request.raw, ANY_KEY, x);
      if (v instanceof Promise) v.then(answer, () => answer(refusal(new GatewayError('internal_error'))));
      else answer(v);
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

  const tooLarge = bodyRefusal('too-large', apiBodyLimits(deps.config.server));
  const bodyTooLarge = new GatewayError(tooLarge.type, tooLarge.message, 'body');
  app.setErrorHandler((err, request, reply) => {
    const g = toGatewayError(err, bodyTooLarge);
    if (g.type === 'internal_error') deps.log.error('unhandled API error', { err, url: request.url });
    const wakeId = (request.raw as WithExchange)[EXCHANGE]?.id ?? null;
    if (g.status === 401) reply.header('www-authenticate', 'Bearer');
    if (g.retryAfter !== null) reply.header('retry-after', String(g.retryAfter));
    // Fastify closes an HTTP/1.1 connection whose body it stopped reading; HTTP/2 has no such
    // field (Node's compatibility layer would warn of it on stderr): there the stream alone ends.
    if (request.raw.httpVersionMajor >= 2) reply.removeHeader('connection');
    reply
      .code(g.status)
      .type('application/json; charset=utf-8')
      .send(errorBody(g.type, wakeId, g.message, g.param, g.retryAfter));
  });

  // Known paths, so a wrong method is 405 with Allow rather than 404. The call has
  // passed admission as one any live key may make (the onRequest hook below).
  const known = new KnownPaths();
  app.setNotFoundHandler((request, reply) => {
    const wakeId = (request.raw as WithExchange)[EXCHANGE]?.id ?? null;
    const no = known.answer(request.method, request.url.split('?')[0] as string, wakeId);
    if (no.allow !== null) reply.header('allow', no.allow);
    reply.code(no.status).send(no.body);
  });

  // Every call an operation's `auth` names a scope for passes the one admission (key,
  // scope, buckets), as a proxied request does; its refusal's headers go on the answer.
  // So does a call no operation takes (SPEC Authentication: every call carries a key),
  // as one any live key may make: no key is 401 and draws the unauthenticated bucket,
  // before the path is answered 404 or 405 (and before a body is read).
  // A body the main listener's edge refused (past server.api_body_limit_bytes, or not whole
  // within server.api_body_timeout_ms: management-body.ts) is answered here, once the call
  // has passed admission, as a body past the limit is on the management listener: a refused
  // key is told first (401, or 429 past its address's bucket), an admitted call is charged.
  app.decorateRequest('key', null as never);
  const gates = new WeakMap<RouteAuth, Gate>();
  const refuseBody = (request: FastifyRequest, reply: FastifyReply) => {
    const r = (request.raw as WithBodyRefused)[BODY_REFUSED];
    if (r === undefined) return;
    const x = (request.raw as WithExchange)[EXCHANGE];
    if (x !== undefined) x.errorType = r.type;
    return reply
      .code(r.status)
      .type('application/json; charset=utf-8')
      .send(errorBody(r.type, x?.id ?? null, r.message, 'body'));
  };
  app.addHook('onRequest', async (request, reply) => {
    let gate: Gate | undefined;
    if (request.is404) gate = ANY_KEY;
    else {
      const auth = request.routeOptions.config.auth;
      if (!auth) return refuseBody(request, reply);
      if (auth.scope === null) gate = OPEN_CALL;
      else {
        gate = gates.get(auth);
        if (gate === undefined) {
          gate = apiGate(auth.scope, auth.policy ?? null, auth.charged === false);
          gates.set(auth, gate);
        }
      }
    }
    const x = (request.raw as WithExchange)[EXCHANGE] ?? null;
    const v = await deps.admission.call(request.raw, gate, x);
    const headers = isRefusal(v) ? v.headers : v.limitHeaders;
    if (headers !== null)
      for (let i = 0; i < headers.length; i += 2) reply.header(headers[i] as string, headers[i + 1]);
    if (isRefusal(v)) throw v.error;
    // null for an operation open to anyone (OPEN_CALL), which reads no key.
    request.key = v.key as KeyRecord;
    return refuseBody(request, reply);
  });

  // A call's key is checked as its head comes; its body may come long after (a client holding
  // it half-sent). A key revoked meanwhile, now or at its scheduled time, does nothing with it.
  app.addHook('preHandler', async (request) => {
    const k = request.key as KeyRecord | null;
    if (k === null) return;
    if (isRevoked(deps.ring.get(k.id) ?? k, deps.ring.revocationTime(deps.clock.now()))) throw KEY_REVOKED;
  });

  // A query parameter whose value (or name) has percent-escapes that are not UTF-8 names no
  // text: 400 invalid_request naming it, before anything reads it (parseQuery, query.ts).
  // An operation that takes no query parameters, or no body, says so as every other
  // does of what it does not know: 400 invalid_request naming the first one sent (DESIGN,
  // Errors), before it acts. Those that take some parse them with their own schema.
  app.addHook('preValidation', async (request) => {
    const undecodable = queryEncodingError(request.query);
    if (undecodable !== null) throw undecodable;
    const doc = request.routeOptions.config.doc;
    if (doc === undefined) return;
    if (doc.query === undefined) parseInput(NO_FIELDS, request.query, 'query');
    if (doc.body === undefined && request.method !== 'GET' && request.method !== 'HEAD')
      parseInput(NO_FIELDS, request.body, 'body');
  });

  const docs: RouteDoc[] = [];
  app.addHook('onRoute', (r) => {
    known.add(r.url, [r.method].flat());
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
  // Content-Type (fastify would parse the body of some first, and answer 400), once it
  // has passed admission as a call any live key may make (a refused key is told first).
  const wrapped = (req: IncomingMessage, res: ServerResponse) => {
    // Every answer is the key's to read and nobody else's: no cache keeps one (a browser
    // kept what the console read, readable without a key after Sign out), and none is
    // sniffed as anything but what it says.
    res.setHeader('cache-control', 'no-store');
    res.setHeader('x-content-type-options', 'nosniff');
    if (STANDARD_METHODS.has(req.method ?? '')) return h(req, res);
    req.resume();
    const x = (req as WithExchange)[EXCHANGE] ?? null;
    const wakeId = x?.id ?? null;
    const answer = (v: Admitted | Refusal) => {
      let status: number;
      let body: string;
      if (isRefusal(v)) {
        const g = v.error;
        status = g.status;
        body = JSON.stringify(errorBody(g.type, wakeId, g.message, g.param, g.retryAfter));
      } else {
        const no = known.answer(req.method ?? '', (req.url ?? '').split('?')[0] as string, wakeId);
        status = no.status;
        body = JSON.stringify(no.body);
        if (no.allow !== null) res.setHeader('allow', no.allow);
      }
      const headers = isRefusal(v) ? v.headers : v.limitHeaders;
      if (headers !== null)
        for (let i = 0; i < headers.length; i += 2) res.setHeader(headers[i] as string, headers[i + 1] as string);
      res.writeHead(status, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
      });
      res.end(body);
    };
    const v = deps.admission.call(req, ANY_KEY, x);
    if (v instanceof Promise) v.then(answer, () => answer(refusal(new GatewayError('internal_error'))));
    else answer(v);
  };
  return { app, handler: wrapped };
}
