import type { Clock } from '../clock.js';
import { newEventId } from '../ids.js';
import { pendingDelivery } from './delivery.js';
import { type Dispatcher, queueFull } from './dispatcher.js';
import type { DeliveryRecord, EndpointRecord } from './records.js';

/** The event type of POST /v2/webhooks/endpoints/{id}/test: sent to that endpoint only, never fanned out. */
export const TEST_EVENT = 'webhook.test';

export interface TestDeliveryOptions {
  dispatcher: Pick<Dispatcher, 'add'>;
  clock: Clock;
  endpoint: EndpointRecord;
  maxAttempts: number;
}

/**
 * A delivery of a `webhook.test` event to one endpoint, signed and retried like any
 * other, and held against `max_queued_events` like any other: when the queue is full
 * it is neither stored nor sent (503 service_unavailable, with Retry-After).
 */
export async function testDelivery(o: TestDeliveryOptions): Promise<DeliveryRecord> {
  const now = o.clock.now();
  const ep = o.endpoint;
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
      max_attempts: o.maxAttempts,
    },
    now,
  );
  if ((await o.dispatcher.add([d])) === 0) throw queueFull();
  return d;
}
