import { type Exchange, MAX_PATH } from '../capture/recorder.js';
import { withoutGatewayKeys } from '../capture/text.js';
import type { Wake } from '../capture/wake.js';
import type { Config } from '../config/index.js';
import { raisesError, raisesSlow } from '../events/wake-rules.js';

/**
 * What a request thread hands the control thread of a finished request whose spans
 * are exported: the wake's summary and a few numbers the wake does not keep (the
 * caller's span, the upstream's start, the gateway's error type). Plain data: it
 * crosses threads by structured clone, and no OpenTelemetry code runs to make it.
 */
export interface SpanInput {
  kind: 'wake';
  traceId: string;
  spanId: string;
  /** The caller's span ('' when the gateway began the trace). */
  parentSpanId: string;
  wakeId: string;
  method: string;
  route: string;
  path: string;
  status: number;
  clientIp: string;
  userAgent: string;
  /** 'http/1.1', 'http/1.0' or 'h2'. */
  protocol: string;
  /** 'https' on a TLS connection, else 'http'. */
  scheme: string;
  /** The path sent upstream, without its query, its gateway keys replaced, cut as wakes' are ('' when it never went). */
  upstreamPath: string;
  keyId: string;
  environment: string;
  /** Arrival, ms since the epoch. */
  start: number;
  /** Arrival to end, ms (fractional). */
  durationMs: number;
  /** Arrival to the request going upstream, ms; -1 when it never went (refused). */
  upstreamAtMs: number;
  /**
   * Arrival to admission admitting the request, ms; -1 when it was not admitted (refused,
   * or its client went away before admission decided). Absent (an input made before the
   * exchange said when it was admitted): admitted when it went upstream.
   */
  admittedAtMs?: number;
  /** The gateway's own error type ('' when the answer was the origin's). */
  errorType: string;
}

/**
 * The path sent upstream as a span may show it: its query left out (a token may stand
 * there), a gateway key replaced as a wake's path has it (unless admission found the
 * URL holds none: `clean`, as the recorder reads it), cut at MAX_PATH characters as a
 * wake's is (a queued span holds no more than that, however long the request's path).
 */
function sentPath(upstream: string, clean: boolean): string {
  if (upstream === '') return '';
  const q = upstream.indexOf('?');
  const sent = q === -1 ? upstream : upstream.slice(0, q);
  const path = clean ? sent : withoutGatewayKeys(sent);
  return path.length > MAX_PATH ? path.slice(0, MAX_PATH) : path;
}

/** The recorder's hook: called with every finished exchange that takes part in a trace. */
export type TraceHook = (x: Exchange, w: Wake, end: number) => void;

/**
 * Picks the requests whose spans are exported: head-sampled ones (x.traceSampled),
 * and with `always_sample` every one that raised wake.error (a 5xx) or wake.slow
 * (slower than its route's latency_objective_ms), the same tests as events/wake-rules.ts.
 * The rest cost a few comparisons.
 */
export function spanSelector(cfg: Pick<Config, 'tracing' | 'routes'>, push: (s: SpanInput) => void): TraceHook {
  const errors = cfg.tracing.always_sample.includes('errors');
  const objectives = new Map<string, number>();
  if (cfg.tracing.always_sample.includes('slow'))
    for (const r of cfg.routes) if (r.latency_objective_ms !== null) objectives.set(r.name, r.latency_objective_ms);
  const slow = objectives.size > 0;
  return (x, w, end) => {
    // Beyond the sampled: what raised wake.error or wake.slow, by the rules that raise them.
    if (!x.traceSampled && !(errors && raisesError(w)) && !(slow && raisesSlow(w, objectives.get(w.route)))) return;
    push({
      kind: 'wake',
      traceId: x.traceId,
      spanId: x.spanId,
      parentSpanId: x.parentSpanId,
      wakeId: w.id,
      method: w.method,
      route: w.route,
      path: w.path,
      status: w.status,
      clientIp: w.client_ip,
      userAgent: w.user_agent,
      protocol: x.protocol,
      scheme: x.secure ? 'https' : 'http',
      upstreamPath: sentPath(x.upstreamPath, x.pathClean),
      keyId: w.key_id,
      environment: w.environment,
      start: x.start,
      durationMs: end - x.t0,
      upstreamAtMs: x.tUp > 0 ? x.tUp - x.t0 : -1,
      admittedAtMs: admittedAt(x),
      errorType: x.errorType,
    });
  };
}

/**
 * When the request was admitted, from arrival (ms), or -1: the exchange's `tAdmit`
 * (performance.now() once admission admitted it, 0 when it never did), else, where an
 * exchange does not say (a tunnel, a replay), when it went upstream.
 */
function admittedAt(x: Exchange): number {
  const t = x.tAdmit;
  if (t > 0) return t - x.t0;
  return x.tUp > 0 ? x.tUp - x.t0 : -1;
}

/** Spans one input becomes: the SERVER span, and a CLIENT span when it went upstream. */
export const spansOf = (s: SpanInput): number => (s.upstreamAtMs >= 0 ? 2 : 1);
