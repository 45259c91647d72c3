import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_FULL,
} from '@opentelemetry/semantic-conventions';
import type { EndpointService } from '../webhooks/endpoints.js';
import type { Send } from '../webhooks/sender.js';
import { CLIENT, otlpKey, type SpanSink } from './otlp.js';
import { type HexSource, newSpanId, serverOf } from './spans.js';

/** One webhook delivery attempt, as its outcome came back to the dispatcher. */
export interface WebhookAttempt {
  kind: 'webhook';
  deliveryId: string;
  eventType: string;
  attempt: number;
  /** The endpoint's URL at the attempt ('' when it was gone). */
  url: string;
  /** The event envelope sent: its data names the wake (and so the trace) that raised it. */
  payload: string;
  startMs: number;
  durationMs: number;
  status: number;
  error: string | null;
}

/**
 * The dispatcher's `send`, each attempt's outcome also handed to `add` as a
 * WebhookAttempt. The span is built later, at export time.
 */
export function tracedSend(
  send: Send,
  endpoints: Pick<EndpointService, 'get'>,
  add: (a: WebhookAttempt) => void,
): Send {
  return async (d, attempt, nowMs) => {
    const out = await send(d, attempt, nowMs);
    add({
      kind: 'webhook',
      deliveryId: d.id,
      eventType: d.event_type,
      attempt,
      url: endpoints.get(d.endpoint_id)?.url ?? '',
      payload: d.payload,
      startMs: nowMs,
      durationMs: out.durationMs,
      status: out.status,
      error: out.error,
    });
    return out;
  };
}

/** The trace and span of the wake an event's data names (wake.error, wake.slow, replay.finished), or null. */
export function wakeTraceOf(payload: string): { traceId: string; spanId: string } | null {
  // Most events name no traced wake: no parse for them.
  if (!payload.includes('"trace_id"')) return null;
  try {
    const e = JSON.parse(payload) as { data?: Record<string, unknown> };
    for (const v of Object.values(e.data ?? {})) {
      const w = v as { trace_id?: unknown; span_id?: unknown } | null;
      if (typeof w?.trace_id === 'string' && typeof w.span_id === 'string' && TRACE_ID.test(w.trace_id)) {
        // A span id that is not one (16 lowercase hex digits) makes no link.
        if (SPAN_ID.test(w.span_id)) return { traceId: w.trace_id, spanId: w.span_id };
      }
    }
  } catch {
    // Not JSON: no link.
  }
  return null;
}

const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;
const ZERO_TRACE = '00000000000000000000000000000000';

const K = {
  method: otlpKey(ATTR_HTTP_REQUEST_METHOD),
  deliveryId: otlpKey('wakegate.delivery_id'),
  eventType: otlpKey('wakegate.event_type'),
  attempt: otlpKey('wakegate.attempt'),
  serverAddress: otlpKey(ATTR_SERVER_ADDRESS),
  serverPort: otlpKey(ATTR_SERVER_PORT),
  urlFull: otlpKey(ATTR_URL_FULL),
  status: otlpKey(ATTR_HTTP_RESPONSE_STATUS_CODE),
  errorType: otlpKey(ATTR_ERROR_TYPE),
};

/**
 * A webhook attempt as a CLIENT span of a trace of its own (it runs later, apart
 * from the request), linked to the span of the wake that raised its event.
 */
export function webhookSpan(a: WebhookAttempt, w: SpanSink, ids: HexSource): void {
  let traceId = ids.take(32);
  while (traceId === ZERO_TRACE) traceId = ids.take(32);
  const failed = a.status === 0 || a.status >= 300;
  w.begin({
    name: 'POST',
    kind: CLIENT,
    traceId,
    spanId: newSpanId(ids),
    parentSpanId: '',
    remoteParent: false,
    startMs: a.startMs,
    endMs: a.startMs + a.durationMs,
  });
  w.str(K.method, 'POST');
  w.str(K.deliveryId, a.deliveryId);
  w.str(K.eventType, a.eventType);
  w.num(K.attempt, a.attempt);
  if (a.url !== '') {
    const u = new URL(a.url);
    const server = serverOf(u);
    w.str(K.serverAddress, server.host);
    w.num(K.serverPort, server.port);
    // The path of a receiver's URL is often its secret (Slack's, Discord's): its origin and `/…` only, as events show it.
    w.str(K.urlFull, `${u.origin}/…`);
  }
  if (a.status !== 0) w.num(K.status, a.status);
  if (failed) w.str(K.errorType, a.status === 0 ? (a.error ?? 'error') : String(a.status));
  const wake = wakeTraceOf(a.payload);
  // The link's flags are what is known of the wake's span context, and the sampled flag is
  // not: the event's data (a public payload) carries the wake's trace and span ids only, and
  // the trace flags the wake was served with ('01' head-sampled, '00' otherwise, even for one
  // exported at its end for a 5xx or its slowness) are in neither the wake nor the delivery.
  // Whether this gateway exported that span is no answer either: a delivery may come from
  // another gateway of the fleet, after a restart, or days later, and a span chosen for export
  // may have been dropped. So no trace flags are claimed (not sampled), and the context is
  // said to be remote: it came back from outside this process, through the payload, as an
  // extracted one does (OTLP Link.flags: SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | ..._IS_REMOTE_MASK).
  if (wake !== null) w.link(wake.traceId, wake.spanId, 0, true);
  w.end(failed ? (a.error ?? String(a.status)) : '');
}
