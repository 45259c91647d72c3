import type { CapturedDetail } from './detail-types.js';

/** One captured request: SPEC.md's wake plus what the gateway knows about it. */
export interface Wake {
  id: string;
  method: string;
  path: string;
  /**
   * The gateway answered without asking the origin (a refused key, scope, limit,
   * route or path). Not stored; the SLO rules leave such wakes out of an origin's
   * objective.
   */
  refused?: boolean;
  /** Days the wake is kept (its environment's retention), set when it is recorded. */
  retention_days?: number;
  /** A replay's wake: the id of the wake it replays. */
  replay_of?: string;
  /** The exchange, redacted (absent when the route keeps none, or the budget was spent). */
  detail?: CapturedDetail;
  /** The detail was written to the write-ahead log and let go: the batch's segment holds it. */
  detail_in_log?: boolean;
  /** The client's protocol (absent: 'http/1.1'; 'http/1.0', or 'h2' for HTTP/2). */
  protocol?: string;
  /** The client certificate's subject and SHA-256 fingerprint (absent: none was shown). */
  tls_subject?: string;
  tls_fingerprint?: string;
  /** W3C Trace Context: the request's trace and the gateway's span in it (absent: none). */
  trace_id?: string;
  span_id?: string;
  /** The path was longer than the stored cap and was cut (absent: false). */
  path_truncated?: boolean;
  route: string;
  status: number;
  latency_ms: number;
  consumer: string;
  key_id: string;
  environment: string;
  region: string;
  /** Milliseconds since the epoch; the same millisecond as the id's time part. */
  captured_at: number;
  request_bytes: number;
  response_bytes: number;
  client_ip: string;
  user_agent: string;
}
