import { MinHeap } from './heap.js';
import type { DeliveryRecord } from './records.js';

/**
 * Deliveries this instance holds: those waiting, one min-heap per endpoint by
 * next_attempt_at (so a per-endpoint cap costs nothing to respect), and the ids of
 * those waiting or taken for an attempt (a fleet's scan takes in only the others).
 */
export class Waiting {
  private readonly heaps = new Map<string, MinHeap<DeliveryRecord>>();
  private readonly held = new Set<string>();
  private count = 0;
  private rotate = 0;
  /** No delivery waiting here is due after this (it may be later than all once some leave). */
  private latest = Number.NEGATIVE_INFINITY;

  get size(): number {
    return this.count;
  }

  /** Waiting here or taken for an attempt. */
  holds(id: string): boolean {
    return this.held.has(id);
  }

  push(d: DeliveryRecord): void {
    let q = this.heaps.get(d.endpoint_id);
    if (!q) {
      q = new MinHeap<DeliveryRecord>((x) => x.next_attempt_at ?? 0);
      this.heaps.set(d.endpoint_id, q);
    }
    q.push(d);
    this.held.add(d.id);
    this.count++;
    const t = d.next_attempt_at ?? 0;
    if (t > this.latest) this.latest = t;
  }

  /**
   * Puts every delivery due after `latest` at the time `retime` gives it (a copy of it,
   * due by `latest`); how many. Costs nothing while none waits past `latest`, else one
   * pass over those waiting.
   */
  retime(latest: number, retime: (d: DeliveryRecord) => DeliveryRecord): number {
    if (this.latest <= latest) return 0;
    let n = 0;
    let top = Number.NEGATIVE_INFINITY;
    for (const q of this.heaps.values()) {
      const all: DeliveryRecord[] = [];
      for (let d = q.pop(); d !== undefined; d = q.pop()) all.push(d);
      for (const d of all) {
        let x = d;
        if ((d.next_attempt_at ?? 0) > latest) {
          x = retime(d);
          n++;
        }
        q.push(x);
        top = Math.max(top, x.next_attempt_at ?? 0);
      }
    }
    this.latest = top;
    return n;
  }

  /** A delivery taken for an attempt is no longer held (finished, or another instance's). */
  release(id: string): void {
    this.held.delete(id);
  }

  /** See DeliveryQueue.due. */
  due(now: number, reserve: (d: DeliveryRecord) => boolean): DeliveryRecord[] {
    const out: DeliveryRecord[] = [];
    const ids = [...this.heaps.keys()];
    const n = ids.length;
    if (n === 0) return out;
    this.rotate = (this.rotate + 1) % n;
    for (let k = 0; k < n; k++) {
      const id = ids[(this.rotate + k) % n] as string;
      const q = this.heaps.get(id) as MinHeap<DeliveryRecord>;
      for (let d = q.peek(); d !== undefined && (d.next_attempt_at ?? 0) <= now; d = q.peek()) {
        if (!reserve(d)) break;
        q.pop();
        this.count--;
        out.push(d);
      }
      if (q.size === 0) this.heaps.delete(id);
    }
    return out;
  }

  /** Takes out every delivery waiting for this endpoint. */
  withdraw(endpointId: string): DeliveryRecord[] {
    const q = this.heaps.get(endpointId);
    if (!q) return [];
    this.heaps.delete(endpointId);
    const out: DeliveryRecord[] = [];
    for (let d = q.pop(); d !== undefined; d = q.pop()) {
      this.count--;
      this.held.delete(d.id);
      out.push(d);
    }
    return out;
  }

  /** Takes out the waiting copy of `d`, or null when it does not wait here. */
  take(d: DeliveryRecord): DeliveryRecord | null {
    const q = this.heaps.get(d.endpoint_id);
    if (!q) return null;
    let found: DeliveryRecord | null = null;
    const keep: DeliveryRecord[] = [];
    for (let x = q.pop(); x !== undefined; x = q.pop()) {
      if (x.id !== d.id) keep.push(x);
      else {
        found ??= x;
        this.count--;
      }
    }
    for (const x of keep) q.push(x);
    if (q.size === 0) this.heaps.delete(d.endpoint_id);
    if (found) this.held.delete(found.id);
    return found;
  }

  /** How late the most overdue delivery waiting is at `now` (0 when none is). */
  overdueMs(now: number): number {
    const t = this.earliest();
    return t === null ? 0 : Math.max(0, now - t);
  }

  /** The earliest due time among those waiting, or null when none waits. */
  earliest(): number | null {
    let first: number | null = null;
    for (const q of this.heaps.values()) {
      const t = q.peek()?.next_attempt_at;
      if (t !== null && t !== undefined && (first === null || t < first)) first = t;
    }
    return first;
  }
}
