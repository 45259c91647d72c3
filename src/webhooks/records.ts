/** The records of webhook endpoints and deliveries, as the webhooks domain keeps them (store/webhooks.ts writes them). */

export interface EndpointRecord {
  id: string;
  environment: string;
  url: string;
  events: string[];
  /** The whsec_ signing secret; needed to sign, so it is kept (never logged). */
  secret: string;
  /**
   * After rotate-secret: the secret it replaced, which keeps signing alongside until
   * `previous_secret_until`; when several rotated away still sign, all of them, each
   * with its own end (secrets.ts reads and writes this field).
   */
  previous_secret: string;
  previous_secret_until: number | null;
  /** `deleted` endpoints are kept as rows (so instances learn of the deletion) and shown nowhere. */
  status: 'enabled' | 'disabled' | 'deleted';
  created_at: number;
  /** Start of the current run of consecutive 410 answers, or null. */
  first_410_at: number | null;
  disabled_at: number | null;
  updated_at: number;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'dead_lettered';

export interface DeliveryRecord {
  id: string;
  environment: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  /** The exact body sent: the event envelope as JSON. */
  payload: string;
  /** Attempts made so far. */
  attempt: number;
  max_attempts: number;
  status: DeliveryStatus;
  response_status: number;
  response_body: string;
  duration_ms: number;
  is_replay: boolean;
  replay_of: string | null;
  created_at: number;
  next_attempt_at: number | null;
  updated_at: number;
  /** Set on the record of an attempt's outcome: one row of the attempts log is written with it. */
  attempt_log?: AttemptLog;
}

/** One attempt of a delivery, as GET /v2/webhooks/deliveries/{id} shows it. */
export interface AttemptLog {
  attempt: number;
  at: number;
  response_status: number;
  duration_ms: number;
  error: string | null;
  response_body: string;
}

/**
 * `d` due at `next` instead, without its last attempt's log row (written with that
 * outcome): moved (a clock put back since it was scheduled), its due time is no longer
 * that attempt's time plus the wait it was given.
 */
export function rescheduled(d: DeliveryRecord, next: number | null): DeliveryRecord {
  const { attempt_log: _, ...rest } = d;
  return { ...rest, next_attempt_at: next };
}
