import type { Logger } from '../log.js';
import { follow, type TableChanges } from '../store/changes.js';
import type { KeyTable, Revocation } from '../store/keys.js';
import type { KeyRecord } from './key.js';
import { hashSecret } from './secrets.js';

/**
 * Overlap between polls: a key's updated_at is stamped by the clock of the instance that
 * wrote it, so a write from an instance whose clock is behind another's (this one's
 * included) is read while the clocks differ by up to this much. A poll reads the keys
 * written within it again (a handful; applying one again changes nothing).
 */
const POLL_OVERLAP_MS = 300_000;
/** An announced version storage does not hold yet (a replica behind) is asked for again after these waits. */
const REREAD_MS = [0, 50, 250, 1000];
/** A revocation already in force is confirmed from storage a moment later, off the path of the requests it refuses. */
const CONFIRM_MS = [250, 250, 1000];
/**
 * How much earlier than the use held an edge thread's use may be and still be a batch
 * late (each thread hands its uses over every second): earlier than that, the clock stepped back.
 */
const USAGE_STEP_MS = 10_000;
/** The stored revocations are counted at most this often (a poll may run more often). */
const REVOCATIONS_COUNT_MS = 1000;
/** Announced keys being re-read at once, at most (more wait for the poll). */
const MAX_REREADS = 1000;

/**
 * The in-memory mirror of every API key. The proxy's hot path reads it and never
 * touches storage: a key unknown here is unknown, so a flood of random keys costs
 * one hash and one map miss each. Keys written by this instance are applied at
 * once; keys written by other instances arrive through a poll (every second by
 * default), so a revocation elsewhere takes effect here within about 2 s. On the
 * embedded store nothing outside this process writes keys: the table is read again
 * when a key is written here (another gateway of this process may have written it),
 * and not polled.
 */
export class KeyRing {
  /**
   * Other threads' copies of the ring (edge threads): every key version applied here
   * is handed to it, and `published` waits until they all hold it.
   */
  private readonly publisher: ((keys: KeyRecord[]) => Promise<void>) | null;
  private unpublished: KeyRecord[] = [];
  private publishing: Promise<void> | null = null;
  private readonly byHash = new Map<string, KeyRecord>();
  private readonly byId = new Map<string, KeyRecord>();
  /** Keys a client certificate names (auth: mtls), by its fingerprint. */
  private readonly byFingerprint = new Map<string, KeyRecord>();
  private readonly usage = new Map<string, number>();
  /** The latest time a key's revocation was checked at here (revocationTime). */
  private latest = Number.NEGATIVE_INFINITY;
  private readonly dirtyUsage = new Map<string, number>();
  private maxUpdated = 0;
  /** How many revocations storage held at the last poll that read them all (-1: none yet). */
  private revocationsSeen = -1;
  /** When the revocations were last counted (performance.now()). */
  private countedAt = Number.NEGATIVE_INFINITY;
  private unfollow: (() => void) | null = null;
  /** Usage waits for a flush armed by the first use after one (the embedded store: no poll to ride). */
  private usageFlushMs: number | null = null;
  private usageTimer: NodeJS.Timeout | null = null;
  private polling: Promise<boolean> | null = null;
  /** Announced keys being re-read from storage: the newest version announced for each. */
  private readonly rereads = new Map<string, { version: number }>();
  /**
   * Revocations announced for a version this ring does not hold yet: id to the revoking
   * version and when it was heard. A version older than that one is held revoked from
   * then (apply), so neither what is held nor a read that left before the revocation was
   * stored (the key's first read, or one for a change made just before) serves the key.
   * Gone once a version as new is held (a reread or the poll brings it); only
   * authenticated announcements add to it.
   */
  private readonly revoking = new Map<string, { version: number; at: number }>();

  /**
   * `table` null: a copy kept by the thread that owns the table (an edge thread's ring).
   * `publisher`: hands key versions to the other threads' copies (null: there are none).
   * `applied`: told every key version this ring puts in force (key-holds.ts: what a revoked
   * key holds open is cut), after the ring holds it; null: nothing is.
   */
  constructor(
    private readonly table: KeyTable | null,
    private readonly log: Logger,
    publisher: ((keys: KeyRecord[]) => Promise<void>) | null = null,
    private readonly applied: ((k: KeyRecord) => void) | null = null,
  ) {
    this.publisher = publisher;
  }

  get size(): number {
    return this.byId.size;
  }

  async load(): Promise<void> {
    if (!this.table) return;
    // Counted first: a revocation stored meanwhile moves the count, and the next poll reads it.
    const count = await this.table.revocationCount();
    for (const k of await this.table.changedSince(0)) this.apply(k);
    this.revocationsSeen = count;
  }

  /**
   * Applies one key version if it is newer than what is held. `fromPeer`: announced
   * by another instance, so it does not move the poll's position (that instance's
   * clock is not this one's, and the poll still reads what came before it).
   */
  apply(k: KeyRecord, fromPeer = false): void {
    const held = this.byId.get(k.id);
    if (held && held.updated_at > k.updated_at) return;
    // A revocation is final, and a schedule only ever comes sooner: a newer version without
    // them (written by another instance from a copy it read before) keeps them here.
    if (held?.revoked_at != null && (k.revoked_at === null || k.revoked_at > held.revoked_at))
      k = { ...k, revoked_at: held.revoked_at };
    if (held?.revoke_at != null && (k.revoke_at === null || k.revoke_at > held.revoke_at))
      k = { ...k, revoke_at: held.revoke_at };
    // A version older than an announced revocation (held before it, or brought by a read
    // that left before it was stored) is held revoked from when it was heard.
    const revoking = this.revoking.size === 0 ? undefined : this.revoking.get(k.id);
    if (revoking !== undefined) {
      if (k.updated_at >= revoking.version) this.revoking.delete(k.id);
      else if (k.revoked_at === null || k.revoked_at > revoking.at) k = { ...k, revoked_at: revoking.at };
    }
    if (held && held.secret_hash !== k.secret_hash) this.byHash.delete(held.secret_hash);
    if (held?.tls_fingerprint && this.byFingerprint.get(held.tls_fingerprint)?.id === k.id)
      this.byFingerprint.delete(held.tls_fingerprint);
    this.byId.set(k.id, k);
    this.byHash.set(k.secret_hash, k);
    // A revoked key gives its certificate up: it never hides a live key that took it since.
    if (k.tls_fingerprint && (k.revoked_at === null || !this.byFingerprint.has(k.tls_fingerprint)))
      this.byFingerprint.set(k.tls_fingerprint, k);
    // Never past this instance's now: a version stamped by a clock ahead of it would lift the
    // watermark over every write stamped by the others meanwhile.
    if (!fromPeer && k.updated_at > this.maxUpdated) this.maxUpdated = Math.min(k.updated_at, Date.now());
    if (this.publisher) {
      this.unpublished.push(k);
      if (this.unpublished.length === 1) queueMicrotask(() => void this.published());
    }
    // Every way a key is learnt revoked comes through here: its own API, the poll, an announcement, the control thread.
    this.applied?.(k);
  }

  /**
   * Another instance announced version `version` of key `id` (authenticated: only an
   * instance holding the sealing key can): it is re-read from storage, never taken
   * from the announcement, and applied when newer than what is held. A version that
   * revokes the key refuses it here at once, before storage answers (an announcement
   * can only take a key away, never give one). Versions already held cost nothing; one
   * key is read once at a time.
   */
  announced(id: string, version: number, revoked: boolean, now: number): Promise<void> {
    const table = this.table;
    const held = this.byId.get(id);
    if (!table || (held?.updated_at ?? -1) >= version) return Promise.resolve();
    if (revoked) {
      const r = this.revoking.get(id);
      if (r === undefined || r.version < version) this.revoking.set(id, { version, at: r?.at ?? now });
    }
    // What is held, refused from now (apply): the version storage holds replaces it (it is newer).
    const refused = revoked && held !== undefined && (held.revoked_at === null || held.revoked_at > now);
    if (refused) this.apply(held, true);
    const running = this.rereads.get(id);
    if (running) {
      running.version = Math.max(running.version, version);
      return Promise.resolve();
    }
    if (this.rereads.size >= MAX_REREADS) return Promise.resolve();
    const want = { version };
    this.rereads.set(id, want);
    return this.reread(table, id, want, refused ? CONFIRM_MS : REREAD_MS).finally(() => this.rereads.delete(id));
  }

  private async reread(table: KeyTable, id: string, want: { version: number }, waits: number[]): Promise<void> {
    for (const ms of waits) {
      if ((this.byId.get(id)?.updated_at ?? -1) >= want.version) return;
      if (ms) await new Promise((r) => setTimeout(r, ms).unref());
      try {
        const k = await table.get(id);
        // Announced by a peer: the poll's position stays where this instance's own reads put it.
        if (k) this.apply(k, true);
      } catch (e) {
        this.log.warn('reading an announced key failed; the key poll will bring it', { key_id: id, err: e as Error });
        return;
      }
    }
  }

  /** Resolves once every key version applied so far is held by every copy of the ring. */
  published(): Promise<void> {
    if (!this.publisher || this.unpublished.length === 0) return this.publishing ?? Promise.resolve();
    const batch = this.unpublished;
    this.unpublished = [];
    const before = this.publishing ?? Promise.resolve();
    const send = this.publisher;
    const p = before.then(() =>
      send(batch).catch((e) => this.log.error('handing keys to the edge threads failed', { err: e as Error })),
    );
    this.publishing = p;
    void p.then(() => {
      if (this.publishing === p) this.publishing = null;
    });
    return p;
  }

  /**
   * An edge thread's use of a key (to the second), written back with this ring's own. One
   * earlier than the use held is another thread's batch a moment old (passed by), or, by
   * more than USAGE_STEP_MS, a clock stepped back since the use held (NTP correcting a
   * fast clock): the last use from then on, as `touch` records it.
   */
  used(id: string, sec: number): void {
    const held = this.usage.get(id) ?? 0;
    if (held === sec || (held > sec && held - sec <= USAGE_STEP_MS)) return;
    this.usage.set(id, sec);
    this.dirtyUsage.set(id, sec);
    this.flushUsageSoon();
  }

  /** The uses recorded since the last call (an edge thread hands them to the control thread). */
  takeUsage(): Map<string, number> {
    const batch = new Map(this.dirtyUsage);
    this.dirtyUsage.clear();
    return batch;
  }

  async poll(): Promise<void> {
    await this.read();
  }

  /** Reads the keys changed since the last read (one read at a time); false when it failed. */
  private read(): Promise<boolean> {
    const table = this.table;
    if (!table) return Promise.resolve(true);
    if (this.polling) return this.polling;
    this.polling = (async () => {
      try {
        // Revocations whatever clock stamped them: all of them read again when their count
        // moved (counted at most once a second, however often the poll runs).
        const counting = performance.now() - this.countedAt >= REVOCATIONS_COUNT_MS;
        const count = counting ? await table.revocationCount() : this.revocationsSeen;
        if (counting) this.countedAt = performance.now();
        for (const k of await table.changedSince(this.maxUpdated - POLL_OVERLAP_MS)) this.apply(k);
        if (count !== this.revocationsSeen) {
          for (const [id, r] of await table.allRevocations()) this.revokeHeld(id, r);
          this.revocationsSeen = count;
        }
        return true;
      } catch (e) {
        this.log.warn('key poll failed; keeping the keys held', { err: e as Error });
        return false;
      } finally {
        this.polling = null;
      }
    })();
    return this.polling;
  }

  /**
   * A stored revocation of a key held here without it (or with a later one): the held
   * version, revoked as storage says, as a version at least as new as either.
   */
  private revokeHeld(id: string, r: Revocation): void {
    const held = this.byId.get(id);
    if (held === undefined) return;
    const revokedAt = r.revoked_at !== null && (held.revoked_at === null || r.revoked_at < held.revoked_at);
    const revokeAt = r.revoke_at !== null && (held.revoke_at === null || r.revoke_at < held.revoke_at);
    if (!revokedAt && !revokeAt) return;
    this.apply({
      ...held,
      revoked_at: revokedAt ? r.revoked_at : held.revoked_at,
      revoke_at: revokeAt ? r.revoke_at : held.revoke_at,
      updated_at: Math.max(held.updated_at, r.written_at),
    });
  }

  /** A read that starts now (one already running may have started before a write it must see). */
  private async freshRead(): Promise<boolean> {
    if (this.polling) await this.polling;
    return this.read();
  }

  bySecret(secret: string): KeyRecord | undefined {
    return this.byHash.get(hashSecret(secret));
  }

  /** The key a client certificate names: its SHA-256 fingerprint, lower-case hex. */
  byCertificate(fingerprint: string): KeyRecord | undefined {
    return this.byFingerprint.get(fingerprint);
  }

  byHashValue(hash: string): KeyRecord | undefined {
    return this.byHash.get(hash);
  }

  /**
   * The time a key's revocation is checked at: `now`, or a later time it was already
   * checked at. A scheduled revocation in force stays so when the clock is stepped back
   * before the sweep has made it final (revoked_at written): revocation is never undone
   * by the clock (docs/keys-and-limits.md).
   */
  revocationTime(now: number): number {
    if (now > this.latest) this.latest = now;
    return this.latest;
  }

  get(id: string): KeyRecord | undefined {
    return this.byId.get(id);
  }

  all(): IterableIterator<KeyRecord> {
    return this.byId.values();
  }

  /** Records a use, to the second; written back in batches by flushUsage(). */
  touch(id: string, now: number): void {
    const sec = now - (now % 1000);
    if (this.usage.get(id) === sec) return;
    this.usage.set(id, sec);
    this.dirtyUsage.set(id, sec);
    this.flushUsageSoon();
  }

  /** The embedded store: usage written `usageFlushMs` after the first use since the last write (one timer at a time). */
  private flushUsageSoon(): void {
    if (this.usageFlushMs === null || this.usageTimer !== null) return;
    this.usageTimer = setTimeout(() => {
      this.usageTimer = null;
      void this.flushUsage();
    }, this.usageFlushMs);
    this.usageTimer.unref();
  }

  lastUsedInMemory(id: string): number | undefined {
    return this.usage.get(id);
  }

  async flushUsage(): Promise<void> {
    if (this.dirtyUsage.size === 0 || !this.table) return;
    const batch = new Map(this.dirtyUsage);
    this.dirtyUsage.clear();
    try {
      await this.table.writeUsage(batch);
    } catch (e) {
      // Put them back unless a newer use arrived meanwhile; the next flush retries.
      for (const [id, t] of batch) if (!this.dirtyUsage.has(id)) this.dirtyUsage.set(id, t);
      this.log.warn('writing key usage failed; will retry', { err: e as Error });
      this.flushUsageSoon();
    }
  }

  /**
   * Keeps the ring fresh. `changes` null (a ClickHouse server): polls every `pollMs`
   * and writes usage back every `usageFlushMs`. Otherwise (the embedded store) reads
   * when a key is written in this process, again every `pollMs` while that read fails,
   * and writes usage back `usageFlushMs` after the first use since the last write.
   */
  start(pollMs: number, usageFlushMs = 5_000, changes: TableChanges | null = null): void {
    if (changes) {
      this.unfollow = follow({ table: 'api_keys', changes, everyMs: pollMs, read: () => this.freshRead() });
      this.usageFlushMs = usageFlushMs;
      if (this.dirtyUsage.size > 0) this.flushUsageSoon();
      return;
    }
    let ticks = 0;
    const every = Math.max(1, Math.round(usageFlushMs / pollMs));
    this.unfollow = follow({
      table: 'api_keys',
      changes: null,
      everyMs: pollMs,
      read: async () => {
        if (++ticks % every === 0) void this.flushUsage();
        return this.read();
      },
    });
  }

  async stop(): Promise<void> {
    this.unfollow?.();
    this.unfollow = null;
    this.usageFlushMs = null;
    if (this.usageTimer) clearTimeout(this.usageTimer);
    this.usageTimer = null;
    if (this.polling) await this.polling;
    await this.flushUsage();
  }
}
