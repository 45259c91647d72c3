import type { Wake } from './wake.js';

/**
 * The optional access log (`log.access: true`): one JSON line per request on
 * stdout, in the log's format. Lines are gathered and written once per turn of the
 * event loop, so the proxy never waits on stdout per request.
 */
export function accessLog(write: (s: string) => void = (s) => process.stdout.write(s)): (w: Wake) => void {
  let pending: string[] = [];
  const flush = () => {
    const lines = pending;
    pending = [];
    write(lines.join(''));
  };
  return (w) => {
    if (pending.length === 0) setImmediate(flush);
    pending.push(
      `${JSON.stringify({
        time: new Date(w.captured_at).toISOString(),
        level: 'info',
        msg: 'access',
        wake_id: w.id,
        method: w.method,
        path: w.path,
        status: w.status,
        latency_ms: w.latency_ms,
        route: w.route,
        environment: w.environment,
        consumer: w.consumer,
        key_id: w.key_id || null,
        client_ip: w.client_ip,
        request_bytes: w.request_bytes,
        response_bytes: w.response_bytes,
      })}\n`,
    );
  };
}
