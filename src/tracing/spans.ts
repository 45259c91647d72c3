import { randomBytes } from 'node:crypto';
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions';
import type { Config } from '../config/index.js';
import type { SpanInput } from './span-input.js';

/**
 * Spans as plain objects shaped like the OpenTelemetry SDK's ReadableSpan (what the
 * OTLP serializer reads); no tracer runs. Built on the control thread only.
 */

type Attr = string | number | boolean;
type HrTime = [seconds: number, nanos: number];
export interface SpanLike {
  name: string;
  /** The API's SpanKind: 1 SERVER, 2 CLIENT. */
  kind: number;
  spanContext(): { traceId: string; spanId: string; traceFlags: number };
  parentSpanContext: { traceId: string; spanId: string; traceFlags: number; isRemote: boolean } | undefined;
  startTime: HrTime;
  endTime: HrTime;
  duration: HrTime;
  ended: true;
  attributes: Record<string, Attr>;
  droppedAttributesCount: 0;
  events: { name: string; time: HrTime; attributes: Record<string, Attr> }[];
  droppedEventsCount: 0;
  links: { context: { traceId: string; spanId: string; traceFlags: number }; attributes: Record<string, Attr> }[];
  droppedLinksCount: 0;
  /** 0 unset, 2 error (the API's SpanStatusCode). */
  status: { code: number; message?: string };
  resource: { attributes: Record<string, Attr> };
  instrumentationScope: { name: string; version: string };
}

export const SERVER = 1;
export const CLIENT = 2;
const SAMPLED = 1;

const hr = (ms: number): HrTime => {
  const s = Math.floor(ms / 1000);
  return [s, Math.round((ms - s * 1000) * 1e6)];
};

/** Random span ids for the spans the control thread adds (its CLIENT spans). */
export function newSpanId(): string {
  return randomBytes(8).toString('hex');
}

/** What every span shares: one resource and scope object (the serializer groups by identity). */
export interface SpanFactory {
  /** A span of `kind` from `startMs` to `endMs` (ms since the epoch). */
  span(o: {
    name: string;
    kind: number;
    traceId: string;
    spanId: string;
    parentSpanId: string;
    remoteParent: boolean;
    startMs: number;
    endMs: number;
    attributes: Record<string, Attr>;
    error: string;
  }): SpanLike;
}

export function spanFactory(serviceName: string, version: string): SpanFactory {
  const resource = { attributes: { [ATTR_SERVICE_NAME]: serviceName } };
  const instrumentationScope = { name: 'wakegate', version };
  return {
    span(o) {
      const ctx = { traceId: o.traceId, spanId: o.spanId, traceFlags: SAMPLED };
      return {
        name: o.name,
        kind: o.kind,
        spanContext: () => ctx,
        parentSpanContext:
          o.parentSpanId === ''
            ? undefined
            : { traceId: o.traceId, spanId: o.parentSpanId, traceFlags: SAMPLED, isRemote: o.remoteParent },
        startTime: hr(o.startMs),
        endTime: hr(o.endMs),
        duration: hr(o.endMs - o.startMs),
        ended: true,
        attributes: o.attributes,
        droppedAttributesCount: 0,
        events: [],
        droppedEventsCount: 0,
        links: [],
        droppedLinksCount: 0,
        // OpenTelemetry's HTTP conventions: a server span is an error for a 5xx (or no answer), not a 4xx.
        status: o.error === '' ? { code: 0 } : { code: 2, message: o.error },
        resource,
        instrumentationScope,
      };
    },
  };
}

/** The origin a route sends an environment's requests to: host and port, for the CLIENT span. */
function originsOf(routes: Config['routes']): Map<string, { host: string; port: number }> {
  const out = new Map<string, { host: string; port: number }>();
  for (const r of routes)
    for (const [env, url] of Object.entries(r.origins)) {
      const u = new URL(url);
      const port = u.port === '' ? (u.protocol === 'https:' ? 443 : 80) : Number(u.port);
      out.set(`${r.name}\u0000${env}`, { host: u.hostname, port });
    }
  return out;
}

/**
 * A finished request's spans: the SERVER span (`{method} {route}`, HTTP semantic
 * conventions) with an event for the admission decision, and a CLIENT span for its
 * upstream attempt when it went upstream.
 */
export function wakeSpans(cfg: Pick<Config, 'routes'>, f: SpanFactory) {
  const origins = originsOf(cfg.routes);
  const buckets = new Map(cfg.routes.map((r) => [r.name, r.rate_limit]));
  return (s: SpanInput, out: SpanLike[]): void => {
    const end = s.start + s.durationMs;
    const upstream = s.upstreamAtMs >= 0;
    const serverError = s.status >= 500 || s.status === 0 ? s.errorType || String(s.status) : '';
    const attributes: Record<string, Attr> = {
      [ATTR_HTTP_REQUEST_METHOD]: s.method,
      [ATTR_HTTP_ROUTE]: s.route,
      'url.path': s.path,
      [ATTR_HTTP_RESPONSE_STATUS_CODE]: s.status,
      [ATTR_CLIENT_ADDRESS]: s.clientIp,
      [ATTR_NETWORK_PROTOCOL_VERSION]: s.protocol === 'h2' ? '2' : '1.1',
      'wakegate.wake_id': s.wakeId,
      'wakegate.environment': s.environment,
    };
    if (s.userAgent !== '') attributes[ATTR_USER_AGENT_ORIGINAL] = s.userAgent;
    if (s.errorType !== '') attributes[ATTR_ERROR_TYPE] = s.errorType;
    else if (serverError !== '') attributes[ATTR_ERROR_TYPE] = serverError;
    const server = f.span({
      name: `${s.method} ${s.route}`,
      kind: SERVER,
      traceId: s.traceId,
      spanId: s.spanId,
      parentSpanId: s.parentSpanId,
      remoteParent: true,
      startMs: s.start,
      endMs: end,
      attributes,
      error: serverError,
    });
    // The admission decision: who it was admitted as, against which bucket, or why it was refused.
    const decision: Record<string, Attr> = { 'wakegate.admission.outcome': upstream ? 'admitted' : 'refused' };
    if (s.keyId !== '') decision['wakegate.key_id'] = s.keyId;
    const bucket = buckets.get(s.route);
    if (bucket !== undefined) decision['wakegate.rate_limit'] = bucket;
    if (!upstream && s.errorType !== '') decision['wakegate.admission.refused_reason'] = s.errorType;
    server.events.push({
      name: 'wakegate.admission',
      time: hr(s.start + Math.max(0, s.upstreamAtMs)),
      attributes: decision,
    });
    out.push(server);
    if (!upstream) return;
    const origin = origins.get(`${s.route}\u0000${s.environment}`);
    const client: Record<string, Attr> = { [ATTR_HTTP_REQUEST_METHOD]: s.method };
    if (origin !== undefined) {
      client[ATTR_SERVER_ADDRESS] = origin.host;
      client[ATTR_SERVER_PORT] = origin.port;
    }
    // The origin answered unless the gateway answered for it (a timeout, a broken connection).
    if (s.errorType === '') client[ATTR_HTTP_RESPONSE_STATUS_CODE] = s.status;
    else client[ATTR_ERROR_TYPE] = s.errorType;
    out.push(
      f.span({
        name: s.method,
        kind: CLIENT,
        traceId: s.traceId,
        spanId: newSpanId(),
        parentSpanId: s.spanId,
        remoteParent: false,
        startMs: s.start + s.upstreamAtMs,
        endMs: end,
        attributes: client,
        error: s.errorType !== '' || s.status >= 500 ? s.errorType || String(s.status) : '',
      }),
    );
  };
}
