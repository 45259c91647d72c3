import { newDeliveryId } from '../ids.js';
import type { DeliveryRecord } from './records.js';

/** A new delivery of one event to one endpoint, due now (fan-out and test sends alike). */
export function pendingDelivery(
  f: Pick<DeliveryRecord, 'environment' | 'endpoint_id' | 'event_id' | 'event_type' | 'payload' | 'max_attempts'>,
  now: number,
  id: string = newDeliveryId(now),
): DeliveryRecord {
  return {
    id,
    ...f,
    attempt: 0,
    status: 'pending',
    response_status: 0,
    response_body: '',
    duration_ms: 0,
    is_replay: false,
    replay_of: null,
    created_at: now,
    next_attempt_at: now,
    updated_at: now,
  };
}
