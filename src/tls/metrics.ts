import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * The TLS instruments, in a thread's registry (made once per registry: with
 * `threads: 1` the control thread and its edge share one). Labels are bounded: the
 * listener (main, ops, management) and the certificate's index in its list.
 */
export function tlsMetrics(registry: Registry) {
  const get = <T>(name: string, make: () => T): T => (registry.getSingleMetric(name) as T | undefined) ?? make();
  return {
    handshakeFailures: get(
      'wakegate_tls_handshake_failures_total',
      () =>
        new Counter({
          name: 'wakegate_tls_handshake_failures_total',
          help: 'TLS handshakes that failed or timed out (garbage, plain HTTP to a TLS port, refused client certificates), by listener',
          labelNames: ['listener'] as const,
          registers: [registry],
        }),
    ),
    reloadFailures: get(
      'wakegate_tls_reload_failures_total',
      () =>
        new Counter({
          name: 'wakegate_tls_reload_failures_total',
          help: 'Certificate reloads refused (a file that does not load): the certificates before it keep serving',
          labelNames: ['listener'] as const,
          registers: [registry],
        }),
    ),
    reloads: get(
      'wakegate_tls_reloads_total',
      () =>
        new Counter({
          name: 'wakegate_tls_reloads_total',
          help: 'Certificate reloads applied (a file changed, or SIGHUP)',
          labelNames: ['listener'] as const,
          registers: [registry],
        }),
    ),
    expiry: get(
      'wakegate_tls_certificate_expiry_timestamp_seconds',
      () =>
        new Gauge({
          name: 'wakegate_tls_certificate_expiry_timestamp_seconds',
          help: "When each certificate served expires (its notAfter, Unix seconds), by listener and index in the listener's list",
          labelNames: ['listener', 'index'] as const,
          registers: [registry],
        }),
    ),
  };
}

export type TlsMetrics = ReturnType<typeof tlsMetrics>;
