import { ManualClock } from '../../src/clock.js';
import { type Config, loadConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import { pendingDelivery } from '../../src/webhooks/delivery.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { EndpointService } from '../../src/webhooks/endpoints.js';
import { LocalQueue } from '../../src/webhooks/local-queue.js';
import type { DeliveryRows } from '../../src/webhooks/queue.js';
import type { DeliveryRecord, EndpointRecord } from '../../src/webhooks/records.js';
import type { AttemptOutcome } from '../../src/webhooks/sender.js';

/** Deliveries as storage keeps them (the latest row of each id), in memory. */
export class MemoryRows implements DeliveryRows {
  readonly byId = new Map<string, DeliveryRecord>();
  /** Every row written, in order (outcomes included). */
  readonly written: DeliveryRecord[] = [];

  async put(rows: readonly DeliveryRecord[]): Promise<void> {
    for (const r of rows) {
      const copy = { ...r };
      this.written.push(copy);
      const held = this.byId.get(r.id);
      if (!held || held.updated_at <= r.updated_at) this.byId.set(r.id, copy);
    }
  }

  async unfinished(): Promise<DeliveryRecord[]> {
    return [...this.byId.values()]
      .filter((d) => (d.status === 'pending' || d.status === 'failed') && d.next_attempt_at !== null)
      .map((d) => ({ ...d }));
  }

  async unfinishedAmong(ids: readonly string[]): Promise<DeliveryRecord[]> {
    return (await this.unfinished()).filter((d) => ids.includes(d.id));
  }

  get(id: string): DeliveryRecord {
    const d = this.byId.get(id);
    if (!d) throw new Error(`no delivery ${id}`);
    return d;
  }
}

export const answer = (status: number, retryAfter: number | null = null): AttemptOutcome => ({
  ok: status >= 200 && status < 300,
  status,
  body: '',
  durationMs: 1,
  retryAfter,
  error: status === 0 ? 'ECONNREFUSED' : null,
});

export function webhooksConfig(webhooks: Partial<Config['webhooks']> = {}): Readonly<Config> {
  return loadConfig({ values: { webhooks }, env: {} });
}

export function endpoint(id: string, over: Partial<EndpointRecord> = {}): EndpointRecord {
  return {
    id,
    environment: 'production',
    url: `https://${id}.example/hook`,
    events: ['*'],
    secret: 'whsec_test',
    previous_secret: '',
    previous_secret_until: null,
    status: 'enabled',
    created_at: 0,
    first_410_at: null,
    disabled_at: null,
    updated_at: 0,
    ...over,
  };
}

/** The events an EndpointService raised (webhook.disabled). */
export interface Emitted {
  type: string;
  environment: string;
  data: Record<string, unknown>;
}

/** An EndpointService on an in-memory table, holding `eps`. */
export function endpointService(cfg: Readonly<Config>, clock: ManualClock, eps: EndpointRecord[]) {
  const emitted: Emitted[] = [];
  const service = new EndpointService({
    cfg,
    table: { put: async () => {}, changedSince: async () => [] },
    events: {
      emit: (type, environment, data, at) => {
        emitted.push({ type, environment, data });
        return {
          id: `evt_${emitted.length}`,
          type,
          environment,
          created_at: at ?? clock.now(),
          data: JSON.stringify(data),
        };
      },
    },
    clock,
    log: silentLogger,
    announce: null,
  });
  for (const e of eps) service.apply(e);
  return { service, emitted };
}

export interface Sent {
  id: string;
  endpoint: string;
  attempt: number;
  at: number;
}

/**
 * A dispatcher on a LocalQueue over in-memory rows, sending through `respond`
 * (which may hold an attempt open by returning a pending promise). Every attempt
 * is in `sent`.
 */
export function dispatcherHarness(o: {
  cfg?: Readonly<Config>;
  clock?: ManualClock;
  rows?: MemoryRows;
  endpoints?: EndpointRecord[];
  respond: (d: DeliveryRecord, attempt: number) => AttemptOutcome | Promise<AttemptOutcome>;
  random?: () => number;
}) {
  const cfg = o.cfg ?? webhooksConfig();
  const clock = o.clock ?? new ManualClock();
  const rows = o.rows ?? new MemoryRows();
  const { service, emitted } = endpointService(cfg, clock, o.endpoints ?? [endpoint('ep_a')]);
  const sent: Sent[] = [];
  const queue = new LocalQueue({ rows, spool: null, clock, log: silentLogger });
  const dispatcher = new Dispatcher({
    cfg,
    queue,
    endpoints: service,
    send: async (d, attempt, nowMs) => {
      sent.push({ id: d.id, endpoint: d.endpoint_id, attempt, at: nowMs });
      return o.respond(d, attempt);
    },
    clock,
    log: silentLogger,
    metrics: createMetrics({ process: false }),
    ...(o.random ? { random: o.random } : {}),
  });
  /** Starts what is due now and waits for those attempts and their outcomes. */
  const step = async () => {
    dispatcher.tick();
    await dispatcher.idle();
  };
  /** A new delivery to `endpointId`, due now, with the schedule's attempts. */
  const delivery = (endpointId = 'ep_a', over: Partial<DeliveryRecord> = {}): DeliveryRecord => ({
    ...pendingDelivery(
      {
        environment: 'production',
        endpoint_id: endpointId,
        event_id: `evt_${sent.length}_${Math.random().toString(36).slice(2)}`,
        event_type: 'wake.error',
        payload: '{}',
        max_attempts: cfg.webhooks.retry_schedule_s.length + 1,
      },
      clock.now(),
    ),
    ...over,
  });
  return { cfg, clock, rows, queue, dispatcher, endpoints: service, emitted, sent, step, delivery };
}
