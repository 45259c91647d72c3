import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import { newEventId, timePart } from '../ids.js';
import type { Logger } from '../log.js';
import type { EventRecord, EventTable } from '../store/events.js';

export const EVENT_TYPES = [
  'wake.error',
  'wake.slow',
  'replay.finished',
  'consumer.quota.warning',
  'slo.burn',
  'key.rotated',
  'key.revoked',
  'webhook.disabled',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export type EventListener = (events: readonly EventRecord[]) => void;

/**
 * Raises events: records them in the events table in batches and hands them to
 * listeners (the webhook dispatcher). Raising never waits on storage.
 */
export class EventBus {
  private buffer: EventRecord[] = [];
  private readonly listeners: EventListener[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  /** Events that could not be written; each one is logged and counted. */
  failed = 0;

  constructor(
    private readonly table: EventTable,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly flushMs = 200,
  ) {}

  onEvents(l: EventListener): void {
    this.listeners.push(l);
  }

  /**
   * Raises one event. `dedupeKey` makes the id deterministic, so the same fact
   * raised twice (two instances noticing one scheduled revocation) is one event.
   */
  emit(
    type: EventType,
    environment: string,
    data: Record<string, unknown>,
    at?: number,
    dedupeKey?: string,
  ): EventRecord {
    const created = at ?? this.clock.now();
    const id = dedupeKey
      ? `evt_${timePart(created)}${createHash('sha256').update(`${type}:${dedupeKey}`).digest('hex').slice(0, 14)}`
      : newEventId(created);
    const ev: EventRecord = { id, type, environment, created_at: created, data };
    this.buffer.push(ev);
    if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.flushMs);
      this.timer.unref();
    }
    return ev;
  }

  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.buffer;
    if (batch.length === 0) return this.flushing;
    this.buffer = [];
    this.flushing = this.flushing.then(async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          await this.table.insert(batch, `events-${batch[0]?.id}-${batch.length}`);
          break;
        } catch (e) {
          if (attempt >= 3) {
            this.failed += batch.length;
            this.log.error('events could not be recorded', { count: batch.length, err: e as Error });
            break;
          }
          await new Promise((r) => setTimeout(r, 100 * attempt));
        }
      }
      for (const l of this.listeners) {
        try {
          l(batch);
        } catch (e) {
          this.log.error('event listener failed', { err: e as Error });
        }
      }
    });
    return this.flushing;
  }
}
