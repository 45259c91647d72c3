import { Outcomes, type OutcomesOptions } from './outcomes.js';
import type { DeliveryQueue, DeliveryRows } from './queue.js';
import { type DeliveryRecord, rescheduled } from './records.js';
import { Waiting } from './waiting.js';

export interface LocalQueueOptions extends OutcomesOptions {
  rows: DeliveryRows;
}

/**
 * A single instance's queue: deliveries wait in memory by due time, and storage
 * (through the write-ahead log) holds them across a restart. Every attempt is this
 * instance's to make, so a claim always succeeds.
 */
export class LocalQueue implements DeliveryQueue {
  private readonly held = new Waiting();
  private readonly outcomes: Outcomes;

  constructor(private readonly o: LocalQueueOptions) {
    this.outcomes = new Outcomes(o);
  }

  get waiting(): number {
    return this.held.size;
  }

  overdueMs(): number {
    return this.held.overdueMs(this.o.clock.now());
  }

  async add(rows: DeliveryRecord[]): Promise<void> {
    await this.o.rows.put(rows);
    for (const d of rows) this.held.push(d);
  }

  due(now: number, reserve: (d: DeliveryRecord) => boolean): DeliveryRecord[] {
    return this.held.due(now, reserve);
  }

  retime(now: number, longestMs: number, at: (d: DeliveryRecord) => number): number {
    return this.held.retime(now + longestMs, (d) => {
      const moved = rescheduled(d, at(d));
      this.outcomes.record(moved);
      return moved;
    });
  }

  claim(d: DeliveryRecord): Promise<DeliveryRecord | null> {
    return Promise.resolve(d);
  }

  settle(outcome: DeliveryRecord): Promise<void> {
    this.outcomes.record(outcome);
    if (outcome.status === 'failed' && outcome.next_attempt_at !== null) this.held.push(outcome);
    else this.held.release(outcome.id);
    return Promise.resolve();
  }

  record(outcome: DeliveryRecord): void {
    this.outcomes.record(outcome);
  }

  withdraw(endpointId: string): DeliveryRecord[] {
    return this.held.withdraw(endpointId);
  }

  end(d: DeliveryRecord): DeliveryRecord | null {
    return this.held.take(d);
  }

  async resume(): Promise<number> {
    let n = 0;
    for (const d of await this.o.rows.unfinished()) {
      if (this.held.holds(d.id)) continue;
      this.held.push(d);
      n++;
    }
    return n;
  }

  resumeLog(): void {
    this.outcomes.resume();
  }

  /** Alone, no other instance makes deliveries: nothing to look for. */
  start(_found: () => void): void {}

  stop(): void {}

  flush(): Promise<void> {
    return this.outcomes.flush();
  }
}
