import type { Wake } from '../store/wakes.js';

const iso = (ms: number): string => new Date(ms).toISOString();

/** The public shape of a wake: SPEC.md's fields plus environment, route, key_id and what was measured. */
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
  };
}
