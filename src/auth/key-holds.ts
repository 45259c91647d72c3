import type { Logger } from '../log.js';
import { isRevoked } from './authorize.js';
import type { KeyRecord } from './key.js';

/** A scheduled revocation further off than this is looked at again then (a timer waits at most 24.8 days). */
const MAX_WAIT_MS = 3_600_000;

/** What one key holds open: how to cut each, the newest version of the key, and the timer of its scheduled revocation. */
interface Held {
  key: KeyRecord;
  cuts: Set<() => void>;
  timer: NodeJS.Timeout | null;
}

/**
 * What keys hold open past their request's check (tunnels), by key id, so that revoking
 * a key cuts them: a key is checked when a request comes, but a tunnel lives on. The
 * key ring hands this every key version it applies (`applied`: a revocation through
 * the API, a scheduled one, another instance's from storage or its announcement, and
 * on edge threads the control thread's versions); a tunnel registers while it is open
 * (`hold`). Built before the ring and the edge, and given to both. A version of a key
 * that holds nothing costs a map miss; a request, nothing.
 */
export class KeyHolds {
  private readonly byKey = new Map<string, Held>();

  constructor(
    private readonly now: () => number,
    private readonly log: Logger,
  ) {}

  /** Keys holding something open now. */
  get size(): number {
    return this.byKey.size;
  }

  /**
   * `cut` is called once `key` is revoked (at once if it already is); the returned
   * function lets go (the tunnel ended). A revocation scheduled for later is waited for.
   */
  hold(key: KeyRecord, cut: () => void): () => void {
    let held = this.byKey.get(key.id);
    if (held === undefined) {
      held = { key, cuts: new Set(), timer: null };
      this.byKey.set(key.id, held);
      held.cuts.add(cut);
      this.schedule(held);
    } else held.cuts.add(cut);
    const h = held;
    return () => {
      if (!h.cuts.delete(cut) || h.cuts.size > 0) return;
      if (h.timer !== null) clearTimeout(h.timer);
      h.timer = null;
      if (this.byKey.get(h.key.id) === h) this.byKey.delete(h.key.id);
    };
  }

  /** The key ring applied this version of a key (the one place it learns a key is revoked). */
  applied(k: KeyRecord): void {
    if (this.byKey.size === 0) return;
    const held = this.byKey.get(k.id);
    if (held === undefined) return;
    held.key = k;
    this.schedule(held);
  }

  /** Cuts what `held` holds if its key is revoked now, else waits for its scheduled revocation (if any). */
  private schedule(held: Held): void {
    if (held.timer !== null) clearTimeout(held.timer);
    held.timer = null;
    const now = this.now();
    const k = held.key;
    if (isRevoked(k, now)) return this.cut(held);
    const at = Math.min(k.revoked_at ?? Number.POSITIVE_INFINITY, k.revoke_at ?? Number.POSITIVE_INFINITY);
    if (at === Number.POSITIVE_INFINITY) return;
    held.timer = setTimeout(
      () => {
        held.timer = null;
        this.schedule(held);
      },
      Math.min(at - now, MAX_WAIT_MS),
    );
    held.timer.unref();
  }

  private cut(held: Held): void {
    if (this.byKey.get(held.key.id) === held) this.byKey.delete(held.key.id);
    const cuts = [...held.cuts];
    held.cuts.clear();
    for (const c of cuts) {
      try {
        c();
      } catch (e) {
        // Called from the ring's apply: one failing cut keeps neither the others nor the key version back.
        this.log.error('cutting what a revoked key held failed', { key_id: held.key.id, err: e as Error });
      }
    }
  }
}
