import { omittedInfo } from './budget.js';
import type { StoredBody, WakeDetail } from './detail-types.js';
import type { Wake } from './wake.js';

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * The public shape of a wake: SPEC.md's fields plus environment, route, key_id, what
 * was measured, the client's protocol and certificate, and the trace context.
 */
export function wakeView(w: Wake) {
  return {
    id: w.id,
    object: 'wake' as const,
    method: w.method,
    path: w.path,
    path_truncated: w.path_truncated === true,
    status: w.status,
    latency_ms: w.latency_ms,
    consumer: w.consumer,
    region: w.region,
    captured_at: iso(w.captured_at),
    environment: w.environment,
    route: w.route,
    key_id: w.key_id || null,
    request_bytes: w.request_bytes,
    response_bytes: w.response_bytes,
    client_ip: w.client_ip,
    user_agent: w.user_agent,
    protocol: w.protocol ?? 'http/1.1',
    tls_subject: w.tls_subject ?? null,
    tls_fingerprint: w.tls_fingerprint ?? null,
    trace_id: w.trace_id ?? null,
    span_id: w.span_id ?? null,
  };
}

/**
 * A body as shown: its text (or base64), or for a body kept only as size and hash
 * (`body_encoding: omitted`) `body: null` with `body_sha256` and `body_omitted_reason`.
 */
const bodyView = (b: StoredBody | null) => {
  if (b === null) return { body: null, body_bytes: null, body_truncated: null, body_encoding: null };
  const base = { body: b.body, body_bytes: b.bytes, body_truncated: b.truncated, body_encoding: b.encoding };
  if (b.encoding !== 'omitted') return base;
  const info = omittedInfo(b.body);
  return { ...base, body: null, body_sha256: info?.sha256 ?? null, body_omitted_reason: info?.reason ?? null };
};

/**
 * One wake with its exchange (GET /v2/wakes/{id}): the summary, then `request` and
 * `response` (headers as [name, value] pairs in order, bodies as kept), `replay_of`,
 * and on a replay's wake the `diff`. `request` and `response` are null when the wake
 * kept no detail (its route keeps none, its route's detail rate was spent, or the
 * memory budget).
 */
export function wakeDetailView(w: Wake, d: WakeDetail | null) {
  return {
    ...wakeView(w),
    replay_of: w.replay_of ?? null,
    request: d === null ? null : { query: d.query, headers: d.request_headers, ...bodyView(d.request_body) },
    response: d === null ? null : { headers: d.response_headers, ...bodyView(d.response_body) },
    diff: d?.diff ?? null,
  };
}
