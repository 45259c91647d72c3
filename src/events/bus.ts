import { createHash } from 'node:crypto';
import { Batcher } from '../capture/batcher.js';
import type { Wal } from '../capture/wal.js';
import type { Clock } from '../clock.js';
import { newEventId, timePart } from '../ids.js';
import type { Logger } from '../log.js';
import type { EventTable } from '../store/events.js';
import type { EventRecord } from './event.js';

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

/**
 * Raises events: records them in the events table in batches (the fan-out reads
 * them from there) and never waits on storage. It rides on the capture Batcher,
 * so events get the same durability as wakes: while storage fails they go to
 * their own spool on disk and are replayed in order, deduplicated, when it answers.
 */
/** Where rules raise events: the bus itself, or (in an edge thread) a message to the control thread's bus. */
export interface EventSink {
  emit(
    type: EventType,
    environment: string,
    data: Record<string, unknown>,
    at?: number,
    dedupeKey?: string,
    idAt?: number,
  ): unknown;
}

export class EventBus implements EventSink {
  private readonly batcher: Batcher<EventRecord>;
  private readonly listeners: (() => void)[] = [];

  constructor(
    table: EventTable,
    private readonly clock: Clock,
    log: Logger,
    spool: Wal<EventRecord> | null = null,
    opts: { flushMs?: number; maxBuffered?: number; onDrop?: (n: number, reason: string) => void } = {},
  ) {
    this.batcher = new Batcher<EventRecord>(
      {
        batchRows: 5000,
        flushIntervalMs: opts.flushMs ?? 100,
        maxBufferedRows: opts.maxBuffered ?? 200_000,
        ...(opts.onDrop ? { onDrop: opts.onDrop } : {}),
        onFlush: () => {
          for (const l of this.listeners) l();
        },
      },
      (rows, token) => table.insert(rows, token),
      spool,
      log,
    );
  }

  get stats() {
    return this.batcher.stats;
  }

  /** Called each time a batch of events is recorded. */
  onRecorded(l: () => void): void {
    this.listeners.push(l);
  }

  /**
   * Raises one event. `dedupeKey` makes the id deterministic, so the same fact
   * raised twice (two instances noticing one scheduled revocation) is one event; the
   * id's time part is `idAt` when given (a fact raised again later, after a restart,
   * keeps its id: a quota window's start), else the event's time.
   */
  emit(
    type: EventType,
    environment: string,
    data: Record<string, unknown>,
    at?: number,
    dedupeKey?: string,
    idAt?: number,
  ): EventRecord {
    const created = at ?? this.clock.now();
    const id = dedupeKey
      ? `evt_${timePart(idAt ?? created)}${createHash('sha256').update(`${type}:${dedupeKey}`).digest('hex').slice(0, 14)}`
      : newEventId(created);
    const ev: EventRecord = { id, type, environment, created_at: created, data: JSON.stringify(data) };
    this.batcher.push(ev);
    return ev;
  }

  /** Starts inserting what the log holds from an earlier run. */
  resume(): void {
    this.batcher.resume();
  }

  /** Writes every event raised so far (or spools them). */
  flush(): Promise<void> {
    return this.batcher.flush();
  }

  stop(): Promise<void> {
    return this.batcher.stop();
  }
}
