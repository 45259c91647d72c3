import { randomBytes } from 'node:crypto';
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
import { CLIENT, newSpanId, type SpanFactory, type SpanLike } from './spans.js';

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
      if (typeof w?.trace_id === 'string' && typeof w.span_id === 'string' && /^[0-9a-f]{32}$/.test(w.trace_id))
        return { traceId: w.trace_id, spanId: w.span_id };
    }
  } catch {
    // Not JSON: no link.
  }
  return null;
}

/**
 * A webhook attempt as a CLIENT span of a trace of its own (it runs later, apart
 * from the request), linked to the span of the wake that raised its event.
 */
export function webhookSpan(a: WebhookAttempt, f: SpanFactory): SpanLike {
  const attributes: Record<string, string | number> = {
    [ATTR_HTTP_REQUEST_METHOD]: 'POST',
    'wakegate.delivery_id': a.deliveryId,
    'wakegate.event_type': a.eventType,
    'wakegate.attempt': a.attempt,
  };
  if (a.url !== '') {
    const u = new URL(a.url);
    attributes[ATTR_SERVER_ADDRESS] = u.hostname;
    attributes[ATTR_SERVER_PORT] = u.port === '' ? (u.protocol === 'https:' ? 443 : 80) : Number(u.port);
    // Without its query: a receiver's URL may carry a token there.
    attributes[ATTR_URL_FULL] = `${u.origin}${u.pathname}`;
  }
  if (a.status !== 0) attributes[ATTR_HTTP_RESPONSE_STATUS_CODE] = a.status;
  const failed = a.status === 0 || a.status >= 300;
  if (failed) attributes[ATTR_ERROR_TYPE] = a.status === 0 ? (a.error ?? 'error') : String(a.status);
  const span = f.span({
    name: 'POST',
    kind: CLIENT,
    traceId: randomBytes(16).toString('hex'),
    spanId: newSpanId(),
    parentSpanId: '',
    remoteParent: false,
    startMs: a.startMs,
    endMs: a.startMs + a.durationMs,
    attributes,
    error: failed ? (a.error ?? String(a.status)) : '',
  });
  const wake = wakeTraceOf(a.payload);
  if (wake !== null)
    span.links.push({ context: { traceId: wake.traceId, spanId: wake.spanId, traceFlags: 1 }, attributes: {} });
  return span;
}
