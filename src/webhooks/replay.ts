import type { Clock } from '../clock.js';
import { GatewayError, missing } from '../errors.js';
import { newDeliveryId, newEventId } from '../ids.js';
import type { DeliveryTable } from '../store/webhooks.js';
import { pendingDelivery } from './delivery.js';
import type { Dispatcher } from './dispatcher.js';
import type { DeliveryRecord, EndpointRecord } from './records.js';

/**
 * A replay is a new delivery of the same event to the same endpoint, marked
 * `is_replay` and `replay_of` (and `x-service-replay: true` on the wire), so it is
 * never confused with a retry. Only a failed or dead-lettered delivery can be
 * replayed.
 */
export async function replayDelivery(
  table: DeliveryTable,
  dispatcher: Dispatcher,
  clock: Clock,
  env: string,
  id: string,
): Promise<DeliveryRecord> {
  const d = id.startsWith('dlv_') ? await table.get(env, id) : null;
  if (!d) throw missing('delivery', 'delivery_id');
  if (d.status !== 'failed' && d.status !== 'dead_lettered') {
    throw new GatewayError(
      'conflict',
      `only a failed or dead_lettered delivery can be replayed; this one is ${d.status}`,
    );
  }
  const now = clock.now();
  const r: DeliveryRecord = {
    ...d,
    id: newDeliveryId(now),
    attempt: 0,
    status: 'pending',
    response_status: 0,
    response_body: '',
    duration_ms: 0,
    is_replay: true,
    replay_of: d.id,
    created_at: now,
    next_attempt_at: now,
    updated_at: now,
  };
  // The original's own retries end: the replay is its next attempt (else the receiver gets it twice).
  if (d.status === 'failed') dispatcher.supersede(d, r.id);
  await dispatcher.add([r]);
  return r;
}

/** The event type of POST /v2/webhooks/endpoints/{id}/test: sent to that endpoint only, never fanned out. */
export const TEST_EVENT = 'webhook.test';

/** A delivery of a `webhook.test` event to one endpoint, signed and retried like any other. */
export async function testDelivery(
  dispatcher: Dispatcher,
  clock: Clock,
  ep: EndpointRecord,
  maxAttempts: number,
): Promise<DeliveryRecord> {
  const now = clock.now();
  const eventId = newEventId(now);
  const payload = JSON.stringify({
    id: eventId,
    type: TEST_EVENT,
    created: Math.floor(now / 1000),
    environment: ep.environment,
    data: { endpoint_id: ep.id, message: 'a test event sent from the /v2 API' },
  });
  const d = pendingDelivery(
    {
      environment: ep.environment,
      endpoint_id: ep.id,
      event_id: eventId,
      event_type: TEST_EVENT,
      payload,
      max_attempts: maxAttempts,
    },
    now,
  );
  await dispatcher.add([d]);
  return d;
}
