import type { Clock } from '../clock.js';
import { GatewayError, missing } from '../errors.js';
import { newDeliveryId } from '../ids.js';
import type { DeliveryTable } from '../store/webhooks.js';
import { type Dispatcher, queueFull } from './dispatcher.js';
import type { EndpointService } from './endpoints.js';
import type { DeliveryRecord } from './records.js';

export interface RedeliverOptions {
  deliveries: Pick<DeliveryTable, 'get'>;
  /** The delivery's endpoint must still take deliveries. */
  endpoints: Pick<EndpointService, 'get'>;
  dispatcher: Pick<Dispatcher, 'supersede' | 'add' | 'room'>;
  clock: Clock;
  environment: string;
  /** The delivery to send again. */
  id: string;
}

/**
 * Sends a failed or dead-lettered delivery again, by hand (the API's
 * POST /v2/webhooks/deliveries/{id}/replay): a new delivery of the same event to the
 * same endpoint, marked `is_replay` and `replay_of` (and `x-service-replay: true` on
 * the wire), so it is never confused with a retry. When the queue is full
 * (`max_queued_events`), nothing changes: no new delivery, and the original keeps
 * its own retries (503 service_unavailable, with Retry-After). An endpoint deleted or
 * disabled takes no replay (409 conflict): it would be dead-lettered unsent.
 */
export async function redeliver(o: RedeliverOptions): Promise<DeliveryRecord> {
  const d = o.id.startsWith('dlv_') ? await o.deliveries.get(o.environment, o.id) : null;
  if (!d) throw missing('delivery', 'delivery_id');
  if (d.status !== 'failed' && d.status !== 'dead_lettered') {
    throw new GatewayError(
      'conflict',
      `only a failed or dead_lettered delivery can be replayed; this one is ${d.status}`,
    );
  }
  // A replay to an endpoint that takes none would be dead-lettered unsent: said now instead.
  const ep = o.endpoints.get(d.endpoint_id);
  if (ep === undefined || ep.status === 'deleted')
    throw new GatewayError('conflict', `this delivery's endpoint ${d.endpoint_id} was deleted`, 'delivery_id');
  if (ep.status !== 'enabled')
    throw new GatewayError(
      'conflict',
      `this delivery's endpoint ${d.endpoint_id} is disabled; enable it (PATCH status: enabled) first`,
      'delivery_id',
    );
  const now = o.clock.now();
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
  if (o.dispatcher.room() < 1) throw queueFull();
  // The original's own retries end once the new delivery is stored, as its next attempt (else the
  // receiver gets it twice), and before any attempt starts. Not before it is stored: a replay that
  // cannot be queued (storage refusing its row) changes nothing, and the original goes on retrying.
  const supersede = d.status === 'failed' ? () => o.dispatcher.supersede(d, r.id) : undefined;
  if ((await o.dispatcher.add([r], supersede)) === 0) throw queueFull();
  return r;
}
