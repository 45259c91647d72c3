import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions';
import type { Config } from '../config/index.js';
import { CLIENT, otlpKey, SERVER, type SpanSink } from './otlp.js';
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
  route: otlpKey(ATTR_HTTP_ROUTE),
  path: otlpKey('url.path'),
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
};

/** The origin a route sends an environment's requests to: host and port, for the CLIENT span. */
function originsOf(routes: Config['routes']): Map<string, Map<string, { host: string; port: number }>> {
  const out = new Map<string, Map<string, { host: string; port: number }>>();
  for (const r of routes) {
    const envs = new Map<string, { host: string; port: number }>();
    for (const [env, url] of Object.entries(r.origins)) {
      const u = new URL(url);
      const port = u.port === '' ? (u.protocol === 'https:' ? 443 : 80) : Number(u.port);
      envs.set(env, { host: u.hostname, port });
    }
    out.set(r.name, envs);
  }
  return out;
}

/**
 * A finished request's spans: the SERVER span (`{method} {route}`, HTTP semantic
 * conventions) with an event for the admission decision, and a CLIENT span for its
 * upstream attempt when it went upstream.
 */
export function wakeSpans(cfg: Pick<Config, 'routes'>, ids: HexSource) {
  const origins = originsOf(cfg.routes);
  const buckets = new Map(cfg.routes.map((r) => [r.name, r.rate_limit]));
  return (s: SpanInput, w: SpanSink): void => {
    const end = s.start + s.durationMs;
    const upstream = s.upstreamAtMs >= 0;
    // OpenTelemetry's HTTP conventions: a server span is an error for a 5xx (or no answer), not a 4xx.
    const serverError = s.status >= 500 || s.status === 0 ? s.errorType || String(s.status) : '';
    w.begin({
      name: `${s.method} ${s.route}`,
      kind: SERVER,
      traceId: s.traceId,
      spanId: s.spanId,
      parentSpanId: s.parentSpanId,
      remoteParent: true,
      startMs: s.start,
      endMs: end,
    });
    w.str(K.method, s.method);
    w.str(K.route, s.route);
    w.str(K.path, s.path);
    w.num(K.status, s.status);
    w.str(K.client, s.clientIp);
    w.str(K.protocol, s.protocol === 'h2' ? '2' : '1.1');
    w.str(K.wakeId, s.wakeId);
    w.str(K.environment, s.environment);
    if (s.userAgent !== '') w.str(K.userAgent, s.userAgent);
    if (s.errorType !== '') w.str(K.errorType, s.errorType);
    else if (serverError !== '') w.str(K.errorType, serverError);
    // The admission decision: who it was admitted as, against which bucket, or why it was refused.
    w.event('wakegate.admission', s.start + Math.max(0, s.upstreamAtMs));
    w.str(K.outcome, upstream ? 'admitted' : 'refused');
    if (s.keyId !== '') w.str(K.keyId, s.keyId);
    const bucket = buckets.get(s.route);
    if (bucket !== undefined) w.str(K.rateLimit, bucket);
    if (!upstream && s.errorType !== '') w.str(K.refusedReason, s.errorType);
    w.endEvent();
    w.end(serverError);
    if (!upstream) return;
    w.begin({
      name: s.method,
      kind: CLIENT,
      traceId: s.traceId,
      spanId: newSpanId(ids),
      parentSpanId: s.spanId,
      remoteParent: false,
      startMs: s.start + s.upstreamAtMs,
      endMs: end,
    });
    w.str(K.method, s.method);
    const origin = origins.get(s.route)?.get(s.environment);
    if (origin !== undefined) {
      w.str(K.serverAddress, origin.host);
      w.num(K.serverPort, origin.port);
    }
    // The origin answered unless the gateway answered for it (a timeout, a broken connection).
    if (s.errorType === '') w.num(K.status, s.status);
    else w.str(K.errorType, s.errorType);
    w.end(s.errorType !== '' || s.status >= 500 ? s.errorType || String(s.status) : '');
  };
}
