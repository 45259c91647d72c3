import type { Clock } from '../clock.js';
import { GatewayError, missing } from '../errors.js';
import { newDeliveryId } from '../ids.js';
import type { DeliveryRecord, DeliveryTable } from '../store/webhooks.js';
import type { Dispatcher } from './dispatcher.js';

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
  await dispatcher.add([r]);
  return r;
}
