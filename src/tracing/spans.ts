import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_METHOD_ORIGINAL,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_FULL,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
  HTTP_REQUEST_METHOD_VALUE_CONNECT,
  HTTP_REQUEST_METHOD_VALUE_DELETE,
  HTTP_REQUEST_METHOD_VALUE_GET,
  HTTP_REQUEST_METHOD_VALUE_HEAD,
  HTTP_REQUEST_METHOD_VALUE_OPTIONS,
  HTTP_REQUEST_METHOD_VALUE_OTHER,
  HTTP_REQUEST_METHOD_VALUE_PATCH,
  HTTP_REQUEST_METHOD_VALUE_POST,
  HTTP_REQUEST_METHOD_VALUE_PUT,
  HTTP_REQUEST_METHOD_VALUE_TRACE,
} from '@opentelemetry/semantic-conventions';
import type { Config } from '../config/index.js';
import { CLIENT, type OtlpAttrs, type OtlpKey, otlpAttrs, otlpKey, SERVER, type SpanSink } from './otlp.js';
import type { SpanInput } from './span-input.js';

/**
 * A finished request's spans, written from its span input into a SpanSink (the OTLP
 * writer, or the tests' oracle) on the control thread: no tracer runs, and no
 * object is made per span or attribute. Attribute names are OpenTelemetry's semantic
 * conventions (@opentelemetry/semantic-conventions), plus wakegate's own.
 */

/** Random hex digits (context.ts' HexPool; the tests pass a fixed sequence). */
export interface HexSource {
  take(n: number): string;
}

const ZERO_SPAN = '0000000000000000';

/** A random span id for a span the control thread adds (a CLIENT span): never all zeros (invalid). */
export function newSpanId(ids: HexSource): string {
  let id = ids.take(16);
  while (id === ZERO_SPAN) id = ids.take(16);
  return id;
}

const K = {
  method: otlpKey(ATTR_HTTP_REQUEST_METHOD),
  methodOriginal: otlpKey(ATTR_HTTP_REQUEST_METHOD_ORIGINAL),
  route: otlpKey(ATTR_HTTP_ROUTE),
  path: otlpKey('url.path'),
  scheme: otlpKey(ATTR_URL_SCHEME),
  full: otlpKey(ATTR_URL_FULL),
  status: otlpKey(ATTR_HTTP_RESPONSE_STATUS_CODE),
  client: otlpKey(ATTR_CLIENT_ADDRESS),
  protocol: otlpKey(ATTR_NETWORK_PROTOCOL_VERSION),
  userAgent: otlpKey(ATTR_USER_AGENT_ORIGINAL),
  errorType: otlpKey(ATTR_ERROR_TYPE),
  serverAddress: otlpKey(ATTR_SERVER_ADDRESS),
  serverPort: otlpKey(ATTR_SERVER_PORT),
  wakeId: otlpKey('wakegate.wake_id'),
  environment: otlpKey('wakegate.environment'),
  outcome: otlpKey('wakegate.admission.outcome'),
  keyId: otlpKey('wakegate.key_id'),
  rateLimit: otlpKey('wakegate.rate_limit'),
  refusedReason: otlpKey('wakegate.admission.refused_reason'),
  refusedAfter: otlpKey('wakegate.refused_reason'),
};

/**
 * The SERVER span's `error.type` for a request its client left before any answer was
 * sent (the wake's 499, nginx's "client closed request", never sent on the wire). The
 * HTTP conventions: `http.response.status_code` only when one was sent; a request that
 * failed before it (cancelled included) has status Error and an `error.type`, low in
 * cardinality, the instrumentation's own where no exception names it.
 */
export const CLIENT_CLOSED = 'client_closed_request';
/** The conventions' fallback `error.type`: an exchange that ended with no status recorded (0) and no error type. */
const OTHER_ERROR = '_OTHER';

/**
 * A URL's `server.address` and `server.port`: an IPv6 address without the brackets a
 * URL writes it in (the conventions' value is the address), the scheme's port when none.
 */
export function serverOf(u: URL): { host: string; port: number } {
  const h = u.hostname;
  const host = h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
  return { host, port: u.port === '' ? (u.protocol === 'https:' ? 443 : 80) : Number(u.port) };
}

/** The origin a route sends an environment's requests to: host and port, for the CLIENT span. */
function originsOf(routes: Config['routes']): Map<string, Map<string, Origin>> {
  const out = new Map<string, Map<string, Origin>>();
  for (const r of routes) {
    const envs = new Map<string, Origin>();
    for (const [env, url] of Object.entries(r.origins)) {
      const u = new URL(url);
      // The upstream path begins with the origin's own path: url.full is its origin (scheme, host, port; never a user:password@) then that.
      envs.set(env, { ...serverOf(u), base: u.origin });
    }
    out.set(r.name, envs);
  }
  return out;
}

/** A route's origin in one environment: `server.address`, `server.port`, and its URL's origin for url.full. */
interface Origin {
  host: string;
  port: number;
  base: string;
}

/**
 * What every request of one route, environment and method shares: the SERVER span's
 * name and its attributes that do not change (per protocol), and the CLIENT span's.
 */
interface Shape {
  name: string;
  http1: OtlpAttrs;
  http10: OtlpAttrs;
  h2: OtlpAttrs;
  clientName: string;
  client: OtlpAttrs;
  /** The origin's scheme, host and port ('' when the route's origin is not known). */
  base: string;
  /** The method is not one the conventions know: `_OTHER`, the request's own in `http.request.method_original`. */
  other: boolean;
}

/**
 * The methods the HTTP semantic conventions know (RFC 9110's and PATCH): any other
 * (a token a client picks, or a known one in another case: methods are case-sensitive)
 * is `_OTHER`, its own spelling in `http.request.method_original`, and named `HTTP`.
 */
const KNOWN_METHODS: ReadonlySet<string> = new Set([
  HTTP_REQUEST_METHOD_VALUE_CONNECT,
  HTTP_REQUEST_METHOD_VALUE_DELETE,
  HTTP_REQUEST_METHOD_VALUE_GET,
  HTTP_REQUEST_METHOD_VALUE_HEAD,
  HTTP_REQUEST_METHOD_VALUE_OPTIONS,
  HTTP_REQUEST_METHOD_VALUE_PATCH,
  HTTP_REQUEST_METHOD_VALUE_POST,
  HTTP_REQUEST_METHOD_VALUE_PUT,
  HTTP_REQUEST_METHOD_VALUE_TRACE,
]);
/** Shapes kept at most (routes x environments x the 9 methods above and _OTHER; environments come and go): about 1 KB each. */
const MAX_SHAPES = 4096;

/**
 * A finished request's spans: the SERVER span (`{method} {route}`, HTTP semantic
 * conventions) with an event for the admission decision, and a CLIENT span for its
 * upstream attempt when it went upstream. What a route's requests share is encoded
 * once (a Shape, and the admission event's outcome and bucket); the rest per request.
 */
export function wakeSpans(cfg: Pick<Config, 'routes'>, ids: HexSource) {
  const origins = originsOf(cfg.routes);
  const buckets = new Map(cfg.routes.map((r) => [r.name, r.rate_limit]));
  // A request that matched no route is recorded as route 'none' (or ''): it has no
  // http.route, and its SERVER span is named by its method alone. (A route the
  // configuration names 'none' keeps its name.)
  const unrouted = (route: string) => route === '' || (route === 'none' && !origins.has('none'));
  const shapes = new Map<string, Map<string, Map<string, Shape>>>();
  let kept = 0;
  const shapeOf = (s: SpanInput): Shape => {
    // Shapes are kept per known method and one for all others: bounded whatever clients send.
    const known = KNOWN_METHODS.has(s.method);
    const m = known ? s.method : HTTP_REQUEST_METHOD_VALUE_OTHER;
    const cached = shapes.get(s.route)?.get(s.environment)?.get(m);
    if (cached !== undefined) return cached;
    const method: [OtlpKey, string] = [K.method, m];
    const env: [OtlpKey, string] = [K.environment, s.environment];
    const origin = origins.get(s.route)?.get(s.environment);
    // The conventions' span name: `{method} {http.route}`, `{method}` with no route; `HTTP` for _OTHER.
    const named = known ? s.method : 'HTTP';
    const routed = !unrouted(s.route);
    const route: [OtlpKey, string][] = routed ? [[K.route, s.route]] : [];
    const shape: Shape = {
      name: routed ? `${named} ${s.route}` : named,
      http1: otlpAttrs([method, ...route, [K.protocol, '1.1'], env]),
      http10: otlpAttrs([method, ...route, [K.protocol, '1.0'], env]),
      h2: otlpAttrs([method, ...route, [K.protocol, '2'], env]),
      clientName: named,
      client: otlpAttrs(
        origin === undefined ? [method] : [method, [K.serverAddress, origin.host], [K.serverPort, origin.port]],
      ),
      other: !known,
      base: origin?.base ?? '',
    };
    if (kept >= MAX_SHAPES) {
      // Past the bound, begin again: the shapes in use now come back, the rest stay out.
      shapes.clear();
      kept = 0;
    }
    let envs = shapes.get(s.route);
    if (envs === undefined) {
      envs = new Map();
      shapes.set(s.route, envs);
    }
    let methods = envs.get(s.environment);
    if (methods === undefined) {
      methods = new Map();
      envs.set(s.environment, methods);
    }
    methods.set(m, shape);
    kept++;
    return shape;
  };
  // The admission event's outcome and the route's bucket, admitted and refused.
  const outcomes = new Map<string, [admitted: OtlpAttrs, refused: OtlpAttrs]>();
  const outcomeOf = (route: string, admitted: boolean): OtlpAttrs => {
    let o = outcomes.get(route);
    if (o === undefined) {
      const bucket = buckets.get(route);
      const of = (outcome: string) =>
        otlpAttrs(
          bucket === undefined
            ? [[K.outcome, outcome]]
            : [
                [K.outcome, outcome],
                [K.rateLimit, bucket],
              ],
        );
      o = [of('admitted'), of('refused')];
      // Routes are the configuration's: bounded.
      if (buckets.has(route)) outcomes.set(route, o);
    }
    return admitted ? o[0] : o[1];
  };
  return (s: SpanInput, w: SpanSink): void => {
    const end = s.start + s.durationMs;
    const upstream = s.upstreamAtMs >= 0;
    // Admitted: the exchange says when (an admitted request may still be refused before it
    // goes upstream: its body held a key, the buffers were full); else it went upstream.
    const admittedAt = s.admittedAtMs === undefined ? s.upstreamAtMs : Math.max(s.admittedAtMs, -1);
    const admitted = admittedAt >= 0 || upstream;
    // No answer was sent: the client went away first (the wake's 499, the gateway's own
    // record; an origin's own 499 reads the same), or the exchange ended with none (0).
    const unanswered = s.status === 0 || (s.status === 499 && s.errorType === '');
    const shape = shapeOf(s);
    // OpenTelemetry's HTTP conventions: a server span is an error for a 5xx or no answer, not a 4xx.
    const errorType =
      s.errorType !== ''
        ? s.errorType
        : unanswered
          ? s.status === 499
            ? CLIENT_CLOSED
            : OTHER_ERROR
          : s.status >= 500
            ? String(s.status)
            : '';
    const serverError = unanswered || s.status >= 500 ? errorType : '';
    w.begin({
      name: shape.name,
      kind: SERVER,
      traceId: s.traceId,
      spanId: s.spanId,
      parentSpanId: s.parentSpanId,
      remoteParent: true,
      startMs: s.start,
      endMs: end,
    });
    // http.request.method, http.route (when one matched), network.protocol.version, wakegate.environment.
    w.attrs(s.protocol === 'h2' ? shape.h2 : s.protocol === 'http/1.0' ? shape.http10 : shape.http1);
    if (shape.other) w.str(K.methodOriginal, s.method);
    w.str(K.scheme, s.scheme);
    w.str(K.path, s.path);
    // Only a status the client was sent (the conventions: "if and only if one was sent").
    if (!unanswered) w.num(K.status, s.status);
    w.str(K.client, s.clientIp);
    w.str(K.wakeId, s.wakeId);
    if (s.userAgent !== '') w.str(K.userAgent, s.userAgent);
    if (errorType !== '') w.str(K.errorType, errorType);
    // The admission decision: who it was admitted as, against which bucket, or why it was
    // refused (no reason when its client went away before admission decided: the wake's
    // 499, which the wake records as refused too).
    w.event('wakegate.admission', s.start + Math.max(0, admittedAt));
    w.attrs(outcomeOf(s.route, admitted));
    if (s.keyId !== '') w.str(K.keyId, s.keyId);
    if (!admitted && s.errorType !== '') w.str(K.refusedReason, s.errorType);
    w.endEvent();
    // Admitted, then refused before it went upstream (its body held a gateway key or could not
    // be read for one, the body buffers were full, no connection to the origin came free).
    if (admitted && !upstream && s.errorType !== '') {
      w.event('wakegate.refused', end);
      w.str(K.refusedAfter, s.errorType);
      w.endEvent();
    }
    w.end(serverError);
    if (!upstream) return;
    w.begin({
      name: shape.clientName,
      kind: CLIENT,
      traceId: s.traceId,
      spanId: newSpanId(ids),
      parentSpanId: s.spanId,
      remoteParent: false,
      startMs: s.start + s.upstreamAtMs,
      endMs: end,
    });
    // http.request.method, server.address, server.port.
    w.attrs(shape.client);
    if (shape.other) w.str(K.methodOriginal, s.method);
    // url.full: what was asked of the origin, without its query (which may carry secrets).
    if (shape.base !== '' && s.upstreamPath !== '') {
      const q = s.upstreamPath.indexOf('?');
      w.str(K.full, shape.base + (q === -1 ? s.upstreamPath : s.upstreamPath.slice(0, q)));
    }
    // The origin answered unless the gateway answered for it (a timeout, a broken connection),
    // or the client went away first: then the gateway let go of the origin's request, a
    // cancellation by the caller, which the conventions do not count an error (no error.type,
    // status unset), and no status is known to have come. Otherwise a CLIENT span is an error
    // for any status from 400 up, its error.type the status code when nothing else names it.
    let clientError = s.errorType;
    if (s.errorType === '' && !unanswered) {
      w.num(K.status, s.status);
      if (s.status >= 400) clientError = String(s.status);
    }
    if (clientError !== '') w.str(K.errorType, clientError);
    w.end(clientError);
  };
}
